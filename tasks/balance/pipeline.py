"""Balance then split a pool with the fewest copies of the data (for builds and re-splits)."""

from __future__ import annotations

import pyarrow as pa

from tasks.balance import codes
from tasks.balance.balance import BalanceResult, balance_questions
from tasks.balance.config import BalanceConfig, SplitConfig
from tasks.balance.split import SplitResult, split_images


def sort_by_question_id(table: pa.Table) -> pa.Table:
    """``table`` sorted by question_id (nulls last, stable); the same object when already sorted.

    Sorting the pool once up front makes every later take (train, test, the release's pool
    copy) a forward scan, and lets callers drop the unsorted table.
    """
    order = codes.sort_order(table["question_id"])
    if len(order) and (order[1:] > order[:-1]).all():
        return table
    return codes.take_rows(table, order)


def balance_and_split(
    pool: pa.Table, balance: BalanceConfig, split: SplitConfig, seed: int
) -> tuple[BalanceResult, SplitResult]:
    """``balance_questions`` then ``split_images`` over the kept rows, taken straight from the pool.

    Same train/test/reports as ``split_images(balance_questions(...).kept, ...)``, but the kept
    table is never materialized (peak memory: pool + train + test instead of pool + kept +
    train + test). The returned BalanceResult's ``kept`` is the zero-copy concatenation
    train + test: the kept questions, train first, then test (each by question_id).
    """
    balanced = balance_questions(pool, balance, seed, materialize=False)
    result = split_images(pool, split, seed, rows=balanced.kept_rows)
    balanced.kept = pa.concat_tables([result.train, result.test])
    return balanced, result
