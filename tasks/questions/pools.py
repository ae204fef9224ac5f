"""Literal and fixed answers: distractors drawn from a pool of the property's values.

Literal: the pool is every distinct value (by normalized label) that the property has on any
subject of the fact table; an item answer draws only from the values that share one of its kinds
(P31 classes; a class: its P279 superclasses; index.item_kinds), so "What kind of thing is the
namesake of this mountain?" never offers "continent" beside "human", nor a city beside countries.
Of the answer's kinds the one with the most values is used; an item answer of no known kind is
rejected (``answer_kind_unknown``): its distractors could not be vouched for. Fixed: the pool is the template's closed set; an answer matches a
member by its normalized label or an alias and renders as the member's label, and an answer
outside the set is rejected. Three distinct pool members other than the answer are drawn with the
question's seed: by default in proportion to how many subjects have each value (a value frequent
as an answer is as frequent as a distractor, so "the choice seen most often" is no tell); with
``method="paper"`` uniformly.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.choice_frame import choice_frame
from reasonvqa.tasks.questions.hashing import draw, sample3

from reasonvqa.tasks.questions.text import clean_phrase_expr, normalize_expr

WEIGHTED_DRAWS = 16  # weighted draws per row before falling back to uniform ones


def pool_choices(df: pl.DataFrame, seeds: np.ndarray, index, method: str = "exchangeable") -> pl.DataFrame:
    """Columns answer, reason, d1, d2, d3 for rows with ``property_id``, ``category``,
    ``value_kind``, ``value_label``, ``answer_qid``; ``index`` is the KnowledgeIndex holding the pools."""
    frame = df.select(
        "property_id",
        "category",
        "value_kind",
        "value_label",
        label=clean_phrase_expr(pl.col("value_label")),
        norm=normalize_expr(pl.col("value_label")),
    )
    typed = (pl.col("category") == "literal") & (pl.col("value_kind") == "item")
    frame = frame.with_columns(kind=pl.when(typed).then(_answer_kind(df, index)).otherwise(pl.lit("")))
    frame = frame.join(index.pool_lookup, on=["property_id", "kind", "norm"], how="left", maintain_order="left")
    frame = frame.join(index.pool_spans, on=["property_id", "kind"], how="left", maintain_order="left")
    frame = frame.join(index.pool.select("pool_idx", canonical="display"), on="pool_idx", how="left", maintain_order="left")

    reason = (
        pl.when(pl.col("value_label").is_null() & (pl.col("value_kind") == "item")).then(pl.lit("no_english_label"))
        .when(pl.col("value_kind").is_null() | ~pl.col("value_kind").is_in(["item", "string"])).then(pl.lit("value_type_mismatch"))
        .when(pl.col("norm").fill_null("") == "").then(pl.lit("empty_answer"))
        .when(pl.col("kind").is_null()).then(pl.lit("answer_kind_unknown"))
        .when(pl.col("pool_idx").is_null() & (pl.col("category") == "fixed")).then(pl.lit("answer_outside_closed_set"))
        .when(pl.col("pool_idx").is_null()).then(pl.lit("answer_not_in_pool"))
        .when(pl.col("pool_size") < 4).then(pl.lit("too_few_distractors"))
    )
    frame = frame.with_columns(
        reason=reason,
        answer=pl.when(pl.col("category") == "fixed").then("canonical").otherwise("label"),
    )
    ok = frame["reason"].is_null().to_numpy()
    size = frame["pool_size"].fill_null(4).to_numpy()
    offset = frame["pool_offset"].fill_null(0).to_numpy()
    local = np.where(ok, frame["pool_idx"].fill_null(0).to_numpy() - offset, 0)
    m = np.where(ok, size - 1, 3)
    q = sample3(m, seeds, stream=31)
    q = q + (q >= local[:, None])
    picked = np.where(ok[:, None], offset[:, None] + q, 0)
    if method == "exchangeable" and len(picked):
        picked = _weighted(picked, ok, offset, size, frame["pool_idx"].fill_null(-1).to_numpy(), seeds, index)
    display = index.pool["display"]
    if display.is_empty():
        display = pl.Series([""], dtype=pl.String)
    rendered = pl.concat([frame["answer"], *(display.gather(picked[:, j]) for j in range(3))])
    return choice_frame(rendered, frame["reason"].to_numpy())


def _answer_kind(df: pl.DataFrame, index) -> pl.Series:
    """Per row the kind of its answer item whose pool of the row's property is largest (ties: the
    smaller class id), null where the item has no known kind."""
    rows = df.select("property_id", "answer_qid").with_row_index("row")
    best = (
        rows.join(index.item_kinds, left_on="answer_qid", right_on="qid")
        .join(index.pool_spans, on=["property_id", "kind"])
        .sort("row", "pool_size", "kind", descending=[False, True, False])
        .unique("row", keep="first")
    )
    return rows.join(best.select("row", "kind"), on="row", how="left").sort("row")["kind"]


def _weighted(uniform: np.ndarray, ok: np.ndarray, offset: np.ndarray, size: np.ndarray, answer: np.ndarray,
              seeds: np.ndarray, index) -> np.ndarray:
    """Three distinct pool members other than the answer, each drawn in proportion to its weight;
    rows that do not find three in ``WEIGHTED_DRAWS`` draws keep their uniform draw."""
    weights = index.pool["weight"].to_numpy().astype(np.float64)
    cum = np.concatenate([[0.0], np.cumsum(weights)])
    start, end = cum[offset], cum[np.minimum(offset + size, len(weights))]
    picked = np.full(uniform.shape, -1, dtype=np.int64)
    found = np.zeros(len(ok), dtype=np.int64)
    for j in range(WEIGHTED_DRAWS):
        u = (draw(seeds, 61 + j) >> np.uint64(11)).astype(np.float64) / float(1 << 53)
        idx = np.searchsorted(cum, start + u * (end - start), side="right") - 1
        fresh = ok & (found < 3) & (idx != answer) & ~(picked == idx[:, None]).any(axis=1)
        rows = np.flatnonzero(fresh)
        picked[rows, found[rows]] = idx[rows]
        found += fresh
    return np.where((found == 3)[:, None], picked, uniform)
