"""A metric over a set of samples as the report gives it: mean, n and the bootstrap 95 % interval, overall and
per group (a list column, e.g. a question's domains, counts the question in each of its groups)."""

from __future__ import annotations

import numpy as np
import polars as pl

from reasonvqa.tasks.evaluate.bootstrap import bootstrap_interval

DIGITS = 4


def summarize(values: pl.Series | np.ndarray) -> dict:
    """{"value": mean, "n": samples, "ci95": [low, high]} of the non-null values (value and ci95 null for none)."""
    array = (values.drop_nulls().to_numpy() if isinstance(values, pl.Series) else np.asarray(values)).astype(np.float64)
    array = array[~np.isnan(array)]
    interval = bootstrap_interval(array)
    return {"value": round(float(array.mean()), DIGITS) if len(array) else None, "n": int(len(array)),
            "ci95": [round(v, DIGITS) for v in interval] if interval else None}


def by_group(scores: pl.DataFrame, group: str, metrics: list[str]) -> dict[str, dict[str, dict]]:
    """{group value: {metric: summary}} in sorted order of the group's values (null: "unknown")."""
    frame = scores.explode(group) if isinstance(scores.schema[group], pl.List) else scores
    frame = frame.with_columns(pl.col(group).cast(pl.String).fill_null("unknown"))
    out = {}
    for value in sorted(frame[group].unique().to_list()):
        mine = frame.filter(pl.col(group) == value)
        out[value] = {metric: summarize(mine[metric]) for metric in metrics}
    return out
