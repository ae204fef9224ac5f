"""Balance then split a pool holding one copy of it in memory (for builds, re-splits, benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa.tasks.balance import codes
from reasonvqa.tasks.balance.balance import REMOVED, BalanceResult, balance_questions
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.split import SplitResult, split_images


@dataclass
class BalancedSplit:
    """``pool``: the input pool's rows reordered as train | test | removed, each by question_id.

    ``split.train`` and ``split.test`` are zero-copy slices of ``pool`` and ``balance.kept`` is
    the slice train + test, so the whole result holds one copy of the pool's data.
    """

    pool: pa.Table
    balance: BalanceResult
    split: SplitResult


def balance_and_split(pool: pa.Table, balance: BalanceConfig, split: SplitConfig, seed: int) -> BalancedSplit:
    """``balance_questions`` then ``split_images`` over the kept rows, with one reordering take.

    Same train/test/reports as ``split_images(balance_questions(pool).kept)``; peak memory is
    two copies of the pool (the caller's and the reordered one) instead of four. Callers
    should drop their own reference and keep using ``result.pool`` (same rows, new order).
    """
    balanced = balance_questions(pool, balance, seed, materialize=False)
    result = split_images(pool, split, seed, rows=balanced.kept_rows, materialize=False)
    if split.drop_test_pairs_seen_in_train:
        _drop_test_pairs_seen_in_train(pool, balanced, result)
    order = np.concatenate([result.train_rows, result.test_rows, balanced.removed_rows])
    if len(order) != pool.num_rows or len(np.unique(order)) != pool.num_rows:
        raise AssertionError("train + test + removed do not partition the pool")  # accounting invariant
    reordered = codes.take_rows(pool, order)
    n_train, n_test = len(result.train_rows), len(result.test_rows)
    result.train = reordered.slice(0, n_train)
    result.test = reordered.slice(n_train, n_test)
    balanced.kept = reordered.slice(0, n_train + n_test)
    return BalancedSplit(pool=reordered, balance=balanced, split=result)


SEEN_IN_TRAIN = "seen_in_train"


def _drop_test_pairs_seen_in_train(pool: pa.Table, balanced: BalanceResult, split: SplitResult) -> None:
    """Move test rows whose (question, answer) pair occurs in train to the removed rows (reason
    ``seen_in_train``); the split report's test counts follow."""
    def pairs(rows: np.ndarray) -> pa.Array:
        table = pool.select(["question", "answer"]).take(pa.array(rows, pa.int64()))
        return pc.binary_join_element_wise(table["question"], table["answer"], "\x1f")

    seen = pc.is_in(pairs(split.test_rows), value_set=pc.unique(pairs(split.train_rows))).to_numpy(zero_copy_only=False)
    seen = seen.astype(bool)
    dropped = split.test_rows[seen]
    split.test_rows = split.test_rows[~seen]
    extra = pool.select(["question_id", "property_id", "answer"]).take(pa.array(dropped, pa.int64()))
    extra = extra.append_column("round", pa.array(np.zeros(len(dropped), np.int32)))
    extra = extra.append_column("reason", pa.array([SEEN_IN_TRAIN] * len(dropped), pa.string())).cast(REMOVED)
    balanced.removed = pa.concat_tables([balanced.removed, extra])
    balanced.removed_rows = np.concatenate([balanced.removed_rows, dropped])
    test_images = pc.count_distinct(pool["image_id"].take(pa.array(split.test_rows, pa.int64()))).as_py()
    split.report["test"] = {"images": test_images, "questions": len(split.test_rows)}
    split.report["test_pairs_seen_in_train_removed"] = int(len(dropped))
    balanced.report.setdefault("removed_by_reason", {})[SEEN_IN_TRAIN] = int(len(dropped))
