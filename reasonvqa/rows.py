"""The integer width of a decision's per-row arrays: row numbers, ranks and dense codes of a table of n rows.

Every such value lies in -1..n (-1 for a null code, n for a null's rank past the last row), so below 2^31 rows
int32 holds them: half the memory of numpy's default int64 for each of the decision's n-sized arrays (at 42 M
rows, 168 MB each). From 2^31 rows on they stay int64.
"""

from __future__ import annotations

import numpy as np

INT32_ROWS = (1 << 31) - 1  # the most rows whose values -1..n all fit int32


def row_dtype(n: int) -> np.dtype:
    """int32 for the row numbers, ranks and codes of a table of at most ``INT32_ROWS`` rows, else int64."""
    return np.dtype(np.int32) if n <= INT32_ROWS else np.dtype(np.int64)


def row_numbers(n: int) -> np.ndarray:
    """``np.arange(n)`` in ``row_dtype(n)``."""
    return np.arange(n, dtype=row_dtype(n))
