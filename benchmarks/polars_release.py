"""The side-by-side baseline: balance + hop mix + split + seen-in-train + write, rewritten in polars.

A straightforward polars implementation of the semantics of tasks/balance (README "Balancing",
"Splitting"): group-bys and joins per round instead of the project's integer codes and
bincounts, polars sorts and gathers instead of row views. It writes the release's train, test
and pool Parquet files with the same layout (tasks/release/writer.write_table_files), and the
benchmark asserts that they are byte-identical to the project's. Only the seeded keys
(tasks/balance/keys.py) and the hop quota formula are shared, so both draw the same order.
Not installed; used by benchmarks/bench_release_floor.py only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from reasonvqa.tasks.balance import keys
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.pipeline import hop_quota
from reasonvqa.tasks.release.writer import write_table_files


def polars_release(pool: pa.Table, balance: BalanceConfig, split: SplitConfig, seed: int, out: Path) -> dict[str, int]:
    """Decide train/test like the project and write ``out/{train,test,pool}``; return the row counts."""
    # decide on the few columns the rules read; the files are gathered from the Arrow pool
    df = pl.from_arrow(pool.select(["question_id", "image_id", "property_id", "answer", "n_hop", "question"]))
    df = df.with_row_index("row")
    narrow = df.drop("question")
    kept = _balance(narrow, balance, seed)
    kept = _hop_mix(kept, balance.hop_shares, seed)
    train, test = _split(kept, split, seed)
    if split.drop_test_pairs_seen_in_train:
        pairs = df.select("row", "question", "answer")
        seen = train.select("row").join(pairs, on="row").select("question", "answer").unique()
        test = test.join(pairs.join(test.select("row"), on="row").join(seen, on=["question", "answer"], how="semi",
                                                                             nulls_equal=True).select("row"),
                         on="row", how="anti")
    counts = {}
    for name, rows in (("train", train), ("test", test), ("pool", df.select("row", "question_id"))):
        order = rows.select("row", "question_id").sort("question_id", maintain_order=True, nulls_last=True)["row"]
        write_table_files(pool.take(pa.array(order.to_numpy().astype("int64"))), out / name)
        counts[name] = len(order)
    return counts


def _balance(df: pl.DataFrame, config: BalanceConfig, seed: int) -> pl.DataFrame:
    """Valid rows in question_id order, then rounds of per-(property, answer) downsampling."""
    missing = lambda c: pl.col(c).is_null() | (pl.col(c) == "")  # noqa: E731
    # the first of repeated ids stays; later repeats and rows missing a key are invalid
    valid = df.sort("question_id", maintain_order=True, nulls_last=True).filter(~missing("question_id"))
    valid = valid.filter(pl.col("question_id").is_first_distinct())
    valid = valid.filter(~missing("image_id") & ~missing("property_id") & ~missing("answer"))
    state = keys.salt(seed, "balance")
    valid = valid.with_columns(key=pl.Series(keys.keys_of(state, np.arange(valid.height))))
    alive = valid
    for _ in range(config.rounds if config.enabled else 0):
        counts = alive.group_by("property_id", "answer").len("c")
        targets = _targets(counts, config).filter(pl.col("c") > pl.col("target"))
        if targets.height == 0:
            break
        image_count = alive.group_by("image_id").len("image_questions")
        ranked = (
            alive.join(targets.select("property_id", "answer", excess=pl.col("c") - pl.col("target")),
                       on=["property_id", "answer"])
            .join(image_count, on="image_id")
            .sort("property_id", "answer", "image_questions", "key", descending=[False, False, True, False])
            .with_columns(rank=pl.int_range(pl.len()).over("property_id", "answer"))
        )
        drop = ranked.filter(pl.col("rank") < pl.col("excess")).select("row")
        alive = alive.join(drop, on="row", how="anti", maintain_order="left")
    return alive


def _targets(counts: pl.DataFrame, config: BalanceConfig) -> pl.DataFrame:
    """Per (property, answer): the round's target (README formula) from the group's ranked counts."""
    c = pl.col("c")
    ranked = counts.sort("property_id", "c", "answer", descending=[False, True, False]).with_columns(
        rank=pl.int_range(pl.len()).over("property_id"),
        tail=c.sum().over("property_id") - c.cum_sum().over("property_id"),
        next=c.shift(-1).over("property_id").fill_null(0),
    )
    by_tail = (config.head_tail_bound * pl.col("tail")).floor().cast(pl.Int64)
    by_ratio = (config.max_ratio * pl.col("next")).floor().cast(pl.Int64)
    order_floor = (config.min_ratio * pl.col("next")).ceil().cast(pl.Int64)
    goal = pl.min_horizontal(c, pl.max_horizontal(pl.min_horizontal(by_tail, by_ratio), order_floor))
    step = c - (config.max_round_fraction * c).ceil().cast(pl.Int64)
    reducible = (pl.col("rank") < config.top_k) & (pl.col("tail") > 0)
    return ranked.with_columns(target=pl.when(reducible).then(pl.max_horizontal(goal, step)).otherwise(c))


def _hop_mix(kept: pl.DataFrame, shares: dict[int, float] | None, seed: int) -> pl.DataFrame:
    """Keep each hop's quota of questions, in a seeded random order within the hop."""
    if not shares:
        return kept
    counts = {int(h): n for h, n in kept.group_by("n_hop").len().iter_rows()}
    quota = hop_quota(counts, shares)
    random_key = keys.keys_of(keys.salt(seed, "hop_mix"), np.arange(kept.height))
    return (
        kept.with_columns(hop_key=pl.Series(random_key))
        .with_columns(rank=pl.col("hop_key").rank("ordinal").over("n_hop") - 1)
        .filter(pl.col("rank") < pl.col("n_hop").cast(pl.Int64).replace_strict(quota, default=0))
        .drop("hop_key", "rank")
    )


def _split(kept: pl.DataFrame, config: SplitConfig, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Image categories from their two most frequent pool answers, then the rounding walk."""
    n = kept.height
    pool_answers = (
        kept.group_by("answer").len("c").filter(pl.col("c").cast(pl.Float64) >= config.pool_min_share * n)
        .sort("answer").with_row_index("answer_index")
    )
    top = (
        kept.join(pool_answers.select("answer", "answer_index"), on="answer")
        .group_by("image_id", "answer_index").len("c")
        .sort("image_id", "c", "answer_index", descending=[False, True, False])
        .group_by("image_id", maintain_order=True)
        .agg(first=pl.col("answer_index").first().cast(pl.Int64),
             second=pl.col("answer_index").get(1, null_on_oob=True).cast(pl.Int64))
    )
    images = (
        kept.group_by("image_id").len("questions").sort("image_id")
        .join(top, on="image_id", how="left", maintain_order="left")
        .with_columns(kind=pl.when(pl.col("first").is_null()).then(0).otherwise(1),
                      first=pl.col("first").fill_null(-1), second=pl.col("second").fill_null(-1))
    )
    size = lambda *cols: pl.len().over(*cols)  # noqa: E731
    images = images.with_columns(second=pl.when(size("kind", "first", "second") == 1).then(-1).otherwise("second"))
    alone = size("kind", "first", "second") == 1
    images = images.with_columns(
        kind=pl.when(alone).then(2).otherwise("kind"), first=pl.when(alone).then(-1).otherwise("first"),
        second=pl.when(alone).then(-1).otherwise("second"),
    )
    random_key = keys.keys_of(keys.salt(seed, "split"), np.arange(images.height))
    r = config.train_ratio
    p = pl.int_range(pl.len()).cast(pl.Float64)
    laid_out = (
        images.with_columns(random_key=pl.Series(random_key))
        .sort("kind", "first", "second", "questions", "random_key", descending=[False, False, False, True, False])
        .with_columns(train=((r * (p + 1) + 0.5).floor() - (r * p + 0.5).floor()) == 1)
    )
    assigned = kept.join(laid_out.select("image_id", "train"), on="image_id", maintain_order="left")
    return assigned.filter(pl.col("train")), assigned.filter(~pl.col("train"))
