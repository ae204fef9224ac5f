"""Number and date distractors taken from real values of the same property.

The pool of a number property is every distinct amount (per unit) that any subject of the fact
table has for it; of a date property every distinct time, at its precision. For one question the
pool is put on the answer's grid (its rendered rounding for numbers, its rendered precision for
dates: values that collapse onto the answer or onto each other count once), a rank 0..3 is drawn
from the question's seed, and the distractors are the ``rank`` pool values just below the answer
and the ``3 - rank`` just above it. The four choices are then four neighbouring real values: any
window of four neighbours is produced by each of its members with the same probability, so a rule
that reads only the choices (closest to the mean, median, shared digits, most frequent choice)
is at chance as far as answers are spread over the pool. Rows whose drawn rank does not fit (the
pool has too few values on one side) are left to the grid method (exchangeable.py).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.hashing import below, draw

_UNITLESS = ("", "1", "Q199")
_ENTITY_PREFIX = "http://www.wikidata.org/entity/"
RANK_STREAM = 91


def number_pool(facts: pl.DataFrame, properties: list[str]) -> pl.DataFrame:
    """property_id, unit_key, amount: the distinct quantities of ``properties`` in ``facts``."""
    return (
        facts.filter(pl.col("property_id").is_in(properties), pl.col("value_kind") == "quantity", pl.col("amount").is_finite())
        .select("property_id", unit_key=unit_key_expr(pl.col("unit_qid")), amount="amount")
        .unique()
        .sort("property_id", "unit_key", "amount")
    )


def date_pool(facts: pl.DataFrame, properties: list[str]) -> pl.DataFrame:
    """property_id, time, precision: the distinct times of ``properties`` in ``facts``."""
    return (
        facts.filter(pl.col("property_id").is_in(properties), pl.col("value_kind") == "time", pl.col("precision") >= 9)
        .select("property_id", "time", pl.col("precision").cast(pl.Int64))
        .unique()
        .sort("property_id", "time", "precision")
    )


def unit_key_expr(unit_qid: pl.Expr) -> pl.Expr:
    """The unit's item id ('' for unitless quantities), so that '1', Q199 and null group together."""
    key = unit_qid.fill_null("").str.strip_prefix(_ENTITY_PREFIX)
    return pl.when(key.is_in(list(_UNITLESS))).then(pl.lit("")).otherwise(key)


def neighbour_distractors(
    groups: np.ndarray, steps: np.ndarray, pools: dict, seeds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Three real neighbours per row on the row's own grid, and a mask of rows that got them.

    ``groups``: a hashable pool key per row (None = no pool); ``steps``: the answer as an integer on
    its grid; ``pools[key]``: the pool's values as integers on that row's grid, sorted and distinct
    (the caller rounds them, since the grid differs per row).
    """
    n = len(steps)
    out = np.zeros((n, 3), dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    rank = below(draw(seeds, RANK_STREAM), np.full(n, 4))
    keys = np.asarray(groups, dtype=object)
    names, inverse = np.unique(np.where(keys == None, "", keys).astype(str), return_inverse=True)  # noqa: E711
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(names) + 1))
    for code, key in enumerate(names.tolist()):
        rows = order[bounds[code]:bounds[code + 1]]
        values = pools.get(key) if key else None
        if values is None or len(values) < 4:
            continue
        s = steps[rows]
        i = np.searchsorted(values, s, side="left")  # values below the answer: values[:i]
        match = (i < len(values)) & (values[np.minimum(i, len(values) - 1)] == s)
        j = i + match  # first value above the answer
        r = rank[rows]
        fits = (r <= i) & (3 - r <= len(values) - j)
        k = np.arange(3)[None, :]
        idx = np.where(k < r[:, None], i[:, None] - r[:, None] + k, j[:, None] + k - r[:, None])
        idx = np.clip(idx, 0, len(values) - 1)
        out[rows] = values[idx]
        ok[rows] = fits
    return out, ok


def pool_on_grid(values: np.ndarray, grid: float) -> np.ndarray:
    """``values`` as distinct sorted integers on ``grid`` (rounded half away from zero like the answer)."""
    return np.unique(np.round(values / grid).astype(np.int64))
