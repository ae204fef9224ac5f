"""Percentile bootstrap of a mean: a seeded, deterministic 95 % interval, resampled in numpy blocks."""

from __future__ import annotations

import numpy as np

RESAMPLES = 1000
SEED = 0
_BLOCK_CELLS = 4_000_000  # indices drawn at once (32 MB of int64): memory stays flat whatever n is


def bootstrap_interval(values: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED,
                       level: float = 0.95) -> tuple[float, float] | None:
    """The ``level`` percentile interval of the mean of ``values`` over ``resamples`` resamples with
    replacement, drawn from ``numpy.random.default_rng(seed)``: the same values and seed give the same
    interval. None for no values."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    per_block = max(1, _BLOCK_CELLS // n)
    for start in range(0, resamples, per_block):
        rows = min(per_block, resamples - start)
        means[start:start + rows] = values[rng.integers(0, n, size=(rows, n))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
