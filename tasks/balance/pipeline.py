"""Balance then split a pool holding one copy of it in memory (for builds, re-splits, benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from reasonvqa.tasks.balance import codes
from reasonvqa.tasks.balance.balance import BalanceResult, balance_questions
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
    order = np.concatenate([result.train_rows, result.test_rows, balanced.removed_rows])
    if len(order) != pool.num_rows or len(np.unique(order)) != pool.num_rows:
        raise AssertionError("train + test + removed do not partition the pool")  # accounting invariant
    reordered = codes.take_rows(pool, order)
    n_train, n_test = len(result.train_rows), len(result.test_rows)
    result.train = reordered.slice(0, n_train)
    result.test = reordered.slice(n_train, n_test)
    balanced.kept = reordered.slice(0, n_train + n_test)
    return BalancedSplit(pool=reordered, balance=balanced, split=result)
