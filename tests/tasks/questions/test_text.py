"""Grammar rules applied to whole columns of questions."""

from __future__ import annotations

import polars as pl
import pytest

from reasonvqa.tasks.questions.text import normalize_text, resolve_articles_expr


def _apply(expr_fn, values):
    return pl.select(expr_fn(pl.lit(pl.Series(values, dtype=pl.String)))).to_series().to_list()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What is this car {a} subclass of?", "What is this car a subclass of?"),
        ("What is this car {a} instance of?", "What is this car an instance of?"),
        ("{a} hour", "an hour"),
        ("{a} honest man", "an honest man"),
        ("{a} university", "a university"),
        ("{a} unit", "a unit"),
        ("{a} uninhabited island", "an uninhabited island"),
        ("{a} umbrella", "an umbrella"),
        ("{a} one-way street", "a one-way street"),
        ("{a} European city", "a European city"),
        ("{a} useful tool", "a useful tool"),
        ("{a} apple and {a} pear", "an apple and a pear"),
    ],
)
def test_articles_follow_the_next_words_sound(text, expected):
    assert _apply(resolve_articles_expr, [text]) == [expected]


def test_normalization_ignores_case_and_punctuation_but_keeps_number_boundaries():
    assert normalize_text("St. Louis") == normalize_text("st louis") == "st louis"
    assert normalize_text("Washington, D.C.") == "washington d c"
    assert normalize_text("1.5 m") != normalize_text("15 m")
    assert normalize_text("Żelazowa Wola") == "żelazowa wola"
    assert normalize_text(" - ") == ""


def test_inflect_imported_without_type_checks_words_as_inflect_does():
    """``english()`` imports inflect with typeguard's decorator as the identity: the engine still answers by inflect's
    rules (hand-checked values), and typeguard's own decorator is put back."""
    import typeguard

    from reasonvqa.tasks.questions.text import english

    engine = english()
    assert [engine.a(w) for w in ("apple", "hour", "unicorn", "x-ray")] == ["an apple", "an hour", "a unicorn", "an x-ray"]
    assert [engine.plural_noun(w) for w in ("bus", "child", "knife", "sheep")] == ["buses", "children", "knives", "sheep"]
    assert [engine.singular_noun(w) for w in ("trees", "women", "glasses", "tree")] == ["tree", "woman", "glass", False]
    assert typeguard.typechecked.__module__.startswith("typeguard")
