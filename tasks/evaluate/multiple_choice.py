"""ReasonVQA's metrics: multiple-choice accuracy and open-ended accuracy by normalized exact match.

A prediction picks a choice by ``choice`` (its 0-based index, or its text) or, without one, by its ``answer``;
it is right when the picked text normalizes to the reference answer (an index out of range picks nothing).
Open-ended accuracy compares ``answer`` with the reference alone. Questions without choices are scored
open-ended only.
"""

from __future__ import annotations

from typing import Sequence

import polars as pl

from reasonvqa.tasks.evaluate.answers import exact_match
from reasonvqa.tasks.evaluate.predictions import Prediction


def picked_choice(choices: list[str] | None, prediction: Prediction) -> str | None:
    """The text of the choice a prediction picks (None when it picks none)."""
    if isinstance(prediction.choice, int):
        return choices[prediction.choice] if choices and 0 <= prediction.choice < len(choices) else None
    return prediction.choice if isinstance(prediction.choice, str) else prediction.answer


def score_multiple_choice(rows: pl.DataFrame, predicted: Sequence[Prediction]) -> pl.DataFrame:
    """Per question of ``rows`` (question_id, answer, choices, n_hop, domains): ``multiple_choice`` (null without
    choices) and ``open_ended`` credits, 1.0 or 0.0."""
    choices = rows["choices"].to_list()
    picked = pl.Series([picked_choice(c, p) for c, p in zip(choices, predicted)], dtype=pl.String)
    answers = pl.Series([p.answer for p in predicted], dtype=pl.String)
    has_choices = rows["choices"].list.len().fill_null(0) > 0
    return rows.select("question_id", "n_hop", "domains").with_columns(
        multiple_choice=pl.when(has_choices).then(exact_match(picked, rows["answer"])).otherwise(None),
        open_ended=exact_match(answers, rows["answer"]))
