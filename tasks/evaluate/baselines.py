"""Blind baselines as predictions: what a model that never sees the image answers, by the bias report's rules.

- ``text-only``: the most common train answer of the same masked question (``reasonvqa/masked_questions.py``,
  the masking of the bias report's ``masked_question_prior``) within the kind; a masked text not in train gets
  the kind's most common train answer;
- ``choices-only``: the choice that occurs most often among the choices of the whole release, train and test
  (the bias report's ``most_frequent_choice``), for multiple-choice questions; a question without choices gets
  an empty answer;
- ``prior``: the most common train answer of the question's kind and task type (else of its kind).

No baseline predicts masks: it sees no image (on a hallucination question that is the right mask answer).
Ties are broken by the smallest answer text (choices-only: the earliest choice), so the file is deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import polars as pl

from reasonvqa.masked_questions import masked
from reasonvqa.tasks.evaluate.release_rows import read_manifest, read_questions


def _most_common(train: pl.DataFrame, keys: list[str], name: str) -> pl.DataFrame:
    """Per ``keys``: the most common train answer (ties: the smallest text) as column ``name``."""
    counts = train.group_by(*keys, "answer").agg(count=pl.len())
    return counts.sort([*keys, "count", "answer"], descending=[False] * len(keys) + [True, False]).group_by(
        keys, maintain_order=True).first().select(*keys, pl.col("answer").alias(name))


def _with_kind(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(kind=pl.col("kind").fill_null("template"), task_type=pl.col("task_type").fill_null(""),
                              answer=pl.col("answer").fill_null(""))


def _fallbacks(train: pl.DataFrame, test: pl.DataFrame) -> pl.DataFrame:
    """``test`` with ``by_kind`` (the kind's most common train answer) and ``overall`` (the release's)."""
    overall = _most_common(train.with_columns(all=pl.lit(0)), ["all"], "overall")["overall"]
    test = test.join(_most_common(train, ["kind"], "by_kind"), on="kind", how="left")
    return test.with_columns(overall=pl.lit(overall[0] if len(overall) else "", dtype=pl.String))


def text_only(train: pl.DataFrame, test: pl.DataFrame) -> pl.DataFrame:
    """question_id, answer: the masked-question prior."""
    train = train.with_columns(masked=masked(train["question"].fill_null("")))
    test = _fallbacks(train, test.with_columns(masked=masked(test["question"].fill_null(""))))
    test = test.join(_most_common(train, ["kind", "masked"], "guess"), on=["kind", "masked"], how="left")
    return test.select("question_id", answer=pl.coalesce("guess", "by_kind", "overall"))


def prior(train: pl.DataFrame, test: pl.DataFrame) -> pl.DataFrame:
    """question_id, answer: the most common train answer per kind and task type."""
    test = _fallbacks(train, test).join(_most_common(train, ["kind", "task_type"], "guess"), on=["kind", "task_type"],
                                        how="left")
    return test.select("question_id", answer=pl.coalesce("guess", "by_kind", "overall"))


def choices_only(train: pl.DataFrame, test: pl.DataFrame) -> pl.DataFrame:
    """question_id, answer, choice: the choice most frequent among all released choices (train and test)."""
    released = pl.concat([train.select("choices"), test.select("choices")])
    counts = released.select(pl.col("choices").explode().drop_nulls().value_counts()).unnest("choices")
    counts = counts.rename({counts.columns[0]: "choice_text"})
    flat = test.select("question_id", "choices").with_row_index("row").explode("choices").with_columns(
        position=pl.int_range(pl.len()).over("row")).join(counts, left_on="choices", right_on="choice_text", how="left")
    best = flat.filter(pl.col("choices").is_not_null()).sort(["row", "count", "position"], descending=[False, True, False]
                                                             ).group_by("row", maintain_order=True).first()
    picked = test.select("question_id").with_row_index("row").join(best.select("row", "choices", "position"), on="row",
                                                                   how="left")
    return picked.select("question_id", answer=pl.col("choices").fill_null(""), choice=pl.col("position").cast(pl.Int64))


RULES = {"text-only": text_only, "choices-only": choices_only, "prior": prior}
BASELINES = tuple(RULES)


def baseline_predictions(release: Path, baseline: str, split: str = "test") -> pl.DataFrame:
    """The ``baseline``'s prediction of every question of ``split`` (train answers from ``train``), by question id."""
    if baseline not in RULES:
        raise ValueError(f"unknown baseline {baseline!r}; one of {', '.join(BASELINES)}")
    read_manifest(release)  # not a release: one line naming its manifest
    train = _with_kind(read_questions(release, "train"))
    test = _with_kind(read_questions(release, split))
    return RULES[baseline](train, test).sort("question_id")


def write_predictions(predictions: pl.DataFrame, path: Path) -> Path:
    """The predictions as JSON lines (question_id, answer, choice where one is picked), in question id order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for row in predictions.iter_rows(named=True):
            line = {"question_id": row["question_id"], "answer": row["answer"]}
            if row.get("choice") is not None:
                line["choice"] = cast(int, row["choice"])
            out.write(json.dumps(line, sort_keys=True) + "\n")
    return path
