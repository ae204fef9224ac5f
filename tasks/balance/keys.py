"""Seeded random keys of records, independent of input row order and library versions.

A record's key is SplitMix64 of (purpose salt + rank of its id in sorted order), so the
vectorized engine and the pure-Python reference of the tests draw the same "random" order for
a seed, independent of library versions and of input row order.
"""

from __future__ import annotations

import numpy as np

from reasonvqa.splitmix import GOLDEN, mix64

MASK = (1 << 64) - 1

PURPOSES = {"balance": 0x42414C414E4345, "split": 0x53504C4954, "hop_mix": 0x484F50}


def salt(seed: int, purpose: str) -> int:
    """The 64-bit starting state for one purpose ("balance", "split", "hop_mix") and seed."""
    return int(mix64(np.array([((seed & MASK) * GOLDEN + PURPOSES[purpose]) & MASK], dtype=np.uint64))[0])


def keys_of(state: int, ranks: np.ndarray) -> np.ndarray:
    """Key of each record of ``ranks`` (0-based) for a salt ``state`` (uint64 result)."""
    with np.errstate(over="ignore"):
        z = ranks.astype(np.uint64)
        z += np.uint64(1)
        z *= np.uint64(GOLDEN)
        z += np.uint64(state)
        return mix64(z)


def key_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``. The keys of ``keys_of`` are distinct (SplitMix64's
    finalizer is a bijection), so the faster unstable argsort gives the same order; equal keys
    fall back to the stable sort."""
    order = np.argsort(keys)
    for start in range(0, len(keys) - 1, _CHECK_ROWS):  # block by block: no second n-sized array of keys
        ranked = keys[order[start:start + _CHECK_ROWS + 1]]
        if not bool((ranked[1:] > ranked[:-1]).all()):
            return np.argsort(keys, kind="stable")
    return order


_CHECK_ROWS = 1 << 20


def first_by_key(keys: np.ndarray, k: int) -> np.ndarray:
    """Mask of the ``k`` entries that come first in ``key_order(keys)``, without sorting them all."""
    keep = np.zeros(len(keys), dtype=bool)
    if k >= len(keys):
        keep[:] = True
        return keep
    if k <= 0:
        return keep
    bound = np.partition(keys, k - 1)[k - 1]
    keep = keys < bound
    at_bound = np.flatnonzero(keys == bound)  # more than one only if keys repeat: the first ones by position
    keep[at_bound[:k - int(keep.sum())]] = True
    return keep
