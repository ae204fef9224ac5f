"""The bootstrap interval: seeded and deterministic, around the mean, degenerate for constant values."""

from __future__ import annotations

import numpy as np

from reasonvqa.tasks.evaluate import bootstrap
from reasonvqa.tasks.evaluate.bootstrap import bootstrap_interval


def test_same_values_and_seed_give_the_same_interval():
    values = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.25, 0.5, 1.0] * 30)
    first = bootstrap_interval(values)
    assert first == bootstrap_interval(values.copy())
    assert first is not None
    low, high = first
    assert low < values.mean() < high
    assert 0.4 < low and high < 0.9
    assert bootstrap_interval(values, seed=1) != first


def test_resampling_in_blocks_draws_the_same_resamples(monkeypatch):
    values = np.linspace(0, 1, 50)
    whole = bootstrap_interval(values)
    monkeypatch.setattr(bootstrap, "_BLOCK_CELLS", 50 * 7)  # 7 resamples per block: 143 blocks
    assert bootstrap_interval(values) == whole


def test_constant_and_empty():
    assert bootstrap_interval(np.ones(10)) == (1.0, 1.0)
    assert bootstrap_interval(np.array([])) is None
