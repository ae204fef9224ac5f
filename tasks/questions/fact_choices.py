"""Answer, distractors and the fact-level reject reasons of every asked fact, once per build seed.

A question's choices depend only on the asked fact (final subject, property), the property's
rendering parameters and the build seed (templated.py): every route and image that reaches the
same fact gets the same choices. So they are computed once per asked fact of the index (far fewer
than candidates: many landmarks share a country, a city, an architect) and every shard gathers
them by ``fact_idx``. The result is cached on the index per (seed, config), so a worker process
that runs many shards computes them once.

Columns, one row per ``fact_idx``: answer, d1, d2, d3 (rendered choices); fact_reason (the first
reject reason that holds for every question of the fact: multiple_answers, no_point_in_time, or
an answer that cannot be rendered); few (fewer than three distinct distractors) and few_reason
(too_few_distractors, or answer_kind_unknown for an item answer of no known kind); padded_answer
(the normalized answer between spaces, for the answer-in-question check); as_of_suffix (" as of
2020?" for a time-varying value with a point in time, else null).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.bank import TemplateBank
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.dates import date_choices
from reasonvqa.tasks.questions.hashing import mix_seed
from reasonvqa.tasks.questions.numbers import number_choices
from reasonvqa.tasks.questions.pools import pool_choices
from reasonvqa.tasks.questions.text import normalize_expr

_LOCK = threading.Lock()  # shards of one process (thread-pool runner) share the index and its cache
CHOICE_NEEDS = [
    "property_id", "category", "value_kind", "value_label", "answer_qid", "amount", "unit_qid", "unit_label", "time", "precision",
    "decimals", "spread", "thousands", "window_years", "max_precision",
]


def fact_choices(index, seed: int, bank: TemplateBank, config: QuestionConfig) -> pl.DataFrame:
    """The choice columns of every asked fact of ``index`` (row i = fact_idx i), cached per seed and config.

    Computed once per key: shards that start together (one thread each) wait for the first one's
    result instead of each computing the same table (30 concurrent shards cost 20 CPU s that way).
    """
    key, future, mine = _claim(index, seed, config)
    if mine:
        _fill(key, future, index, seed, bank, config)
    return future.result()


def prefetch(index, seed: int, bank: TemplateBank, config: QuestionConfig) -> None:
    """Start computing ``fact_choices`` on a thread of its own unless it was started: the shards that
    start with the index then do their references and ids meanwhile instead of waiting (the choices
    are asked for last). Never blocks on the computation."""
    key, future, mine = _claim(index, seed, config)
    if mine:
        threading.Thread(target=_fill, args=(key, future, index, seed, bank, config), daemon=True,
                         name="fact-choices").start()


def _claim(index, seed: int, config: QuestionConfig) -> tuple[tuple, Future, bool]:
    """The cache key, its future, and whether the caller created it (and so must fill it)."""
    key = (seed, config.model_dump_json())
    with _LOCK:
        if key in index.choice_cache:
            return key, index.choice_cache[key], False
        future: Future = Future()
        index.choice_cache[key] = future
        return key, future, True


def _fill(key: tuple, future: Future, index, seed: int, bank: TemplateBank, config: QuestionConfig) -> None:
    try:
        future.set_result(_compute(index, seed, bank, config))
    except BaseException as error:
        with _LOCK:  # a failed computation is not cached: the next caller tries again
            index.choice_cache.pop(key, None)
        future.set_exception(error)


def _compute(index, seed: int, bank: TemplateBank, config: QuestionConfig) -> pl.DataFrame:
    facts = index.facts
    seeds = mix_seed(facts["choice_key"].to_numpy(), seed)
    choices = with_choices(facts.select(CHOICE_NEEDS), seeds, bank, config, index)
    cols = ["answer", "d1", "d2", "d3"]
    same = [pl.col(a) == pl.col(b) for i, a in enumerate(cols) for b in cols[i + 1:]]
    clash = pl.any_horizontal(same).fill_null(True)
    # no three distractors: too few, or none vouched for (an item answer of no known kind); checked after
    # the answer-in-question rule, as the rendered answer exists
    distractor_reasons = ["too_few_distractors", "answer_kind_unknown"]
    unrenderable = pl.col("reason").is_not_null() & ~pl.col("reason").is_in(distractor_reasons)
    # a time-varying value holds for its point in time: "What is the population of this city as of 2020?"
    as_of = facts["point_in_time"].str.extract(r"^([+-]?\d+)-").cast(pl.Int64, strict=False)
    frame = pl.concat([facts.select("n_values", "time_varying", "point_in_time"), choices], how="horizontal")
    frame = frame.with_columns(as_of=as_of)
    as_of_text = pl.when(pl.col("as_of") > 0).then(pl.col("as_of").cast(pl.String)).otherwise(
        (1 - pl.col("as_of")).cast(pl.String) + " BC"
    )
    return frame.select(
        "answer", "d1", "d2", "d3",
        fact_reason=pl.when(pl.col("n_values") > 1).then(pl.lit("multiple_answers"))
        .when(pl.col("time_varying") & pl.col("point_in_time").is_null()).then(pl.lit("no_point_in_time"))
        .when(unrenderable).then("reason"),
        few=pl.col("reason").is_not_null() | clash,
        few_reason=pl.when(pl.col("reason").is_in(distractor_reasons)).then("reason").otherwise(pl.lit("too_few_distractors")),
        padded_answer=" " + normalize_expr(pl.col("answer").fill_null("")) + " ",
        as_of_suffix=pl.when(pl.col("time_varying") & pl.col("as_of").is_not_null()).then(" as of " + as_of_text + "?"),
    )


def with_choices(
    rows: pl.DataFrame, seeds: np.ndarray, bank: TemplateBank, config: QuestionConfig, index
) -> pl.DataFrame:
    """answer, reason, d1..d3 per row of ``rows`` (``CHOICE_NEEDS``), each category by its own rules."""
    makers = {
        "date": lambda df, s: date_choices(df, s, config.latest_year, config.distractors, _real(index.date_pool, config)),
        "number": lambda df, s: number_choices(df, s, bank.units, config.distractors, _real(index.number_pool, config)),
        "literal": lambda df, s: pool_choices(df, s, index, config.distractors),
        "fixed": lambda df, s: pool_choices(df, s, index, config.distractors),
    }
    category = rows["category"].to_numpy()
    parts, where_rows = [], []
    for name, make in makers.items():
        where = np.flatnonzero(category == name)
        if len(where):
            parts.append(make(rows[where], seeds[where]))
            where_rows.append(where)
    if not parts:
        return pl.DataFrame({c: pl.Series(c, [], dtype=pl.String) for c in ("answer", "reason", "d1", "d2", "d3")})
    order = np.argsort(np.concatenate(where_rows), kind="stable")
    return pl.concat(parts)[order]


def _real(pool: pl.DataFrame | None, config: QuestionConfig) -> pl.DataFrame | None:
    """The index's real-value pool where the configured method draws from it (not the paper's)."""
    return pool if config.distractors == "exchangeable" else None
