"""Vectorized text rules for questions and answers: normalization, articles, capitalization.

Every rule is a polars expression so that millions of questions render without a Python loop;
``normalize_text`` applies the same expression to one string, so Python-side checks (the bank's
closed choice sets) and column-side checks can never disagree.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache

import polars as pl

from reasonvqa.loaded_once import loaded_once

_ARTICLE = re.compile(r"\{a\} ([\w'-]+)")


@loaded_once(maxsize=1)
def english():
    """inflect's engine, made when first needed (a re-split, a Dask worker or a flow-run process that never words a
    question never imports inflect).

    inflect wraps its methods in typeguard's ``@typechecked``, which rewrites each at import: 2.3 CPU s a process
    against 0.2 s without, paid by every build. The rules here call it with strings only, so inflect is imported with
    ``typechecked`` as the identity, put back at once; its answers are the same (tests/tasks/questions/test_text.py)."""
    if "inflect" not in sys.modules:
        import typeguard

        checked = typeguard.typechecked
        typeguard.typechecked = _unchecked
        try:
            import inflect  # noqa: F401
        finally:
            typeguard.typechecked = checked
    import inflect

    return inflect.engine()


def _unchecked(function=None, **_options):
    """``typeguard.typechecked`` that leaves the function as it is (bare ``@typechecked`` or with options)."""
    return function if function is not None else (lambda decorated: decorated)


def normalize_expr(expr: pl.Expr) -> pl.Expr:
    """Lowercase, every run of characters that are not letters or digits -> one space, stripped.

    "St. Louis" and "st louis" are equal; "1.5 m" and "15 m" stay different (the separator
    becomes a space instead of disappearing).
    """
    return expr.str.to_lowercase().str.replace_all(r"[^\p{L}\p{N}]+", " ").str.strip_chars()


def normalize_text(text: str) -> str:
    """``normalize_expr`` for one Python string."""
    return pl.select(normalize_expr(pl.lit(text, dtype=pl.String))).item()


@lru_cache(maxsize=4096)
def resolve_articles(text: str) -> str:
    """Replace each ``{a}`` placeholder by "a" or "an" as ``inflect`` chooses for the next word
    ("an hour", "a university", "a one-way street")."""
    return _ARTICLE.sub(lambda m: english().a(m.group(1)), text)


def resolve_articles_expr(expr: pl.Expr) -> pl.Expr:
    """:func:`resolve_articles` over a column (template texts: few distinct values, cached)."""
    return expr.map_elements(resolve_articles, return_dtype=pl.String, skip_nulls=True)


def capitalize_expr(expr: pl.Expr) -> pl.Expr:
    """The first character uppercased, the rest untouched ("the country where" -> "The country where")."""
    return expr.str.slice(0, 1).str.to_uppercase() + expr.str.slice(1)


def normalize_predicate_expr(expr: pl.Expr) -> pl.Expr:
    """A relationship predicate as predicates.yaml keys it: lowercase, single spaces, a leading
    "is"/"are" and a trailing article dropped ("is sitting on a" -> "sitting on")."""
    words = expr.fill_null("").str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars()
    return words.str.replace(r"^(is|are) (.+)$", "${2}").str.replace(r"^(.+) (a|an|the)$", "${1}")


def normalize_predicate(text: str) -> str:
    """``normalize_predicate_expr`` for one Python string."""
    return pl.select(normalize_predicate_expr(pl.lit(text, dtype=pl.String))).item()


def clean_phrase_expr(expr: pl.Expr) -> pl.Expr:
    """A label as it may appear inside a question: no question marks or braces, single spaces."""
    return expr.str.replace_all(r"[?{}]", " ").str.replace_all(r"\s+", " ").str.strip_chars()
