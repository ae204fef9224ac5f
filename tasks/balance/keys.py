"""Seeded random keys that numpy and plain Python compute bit for bit alike.

A record's key is SplitMix64 of (purpose salt + rank of its id in sorted order), so the
vectorized engine and the pure-Python reference draw the same "random" order for a seed,
independent of library versions and of input row order.
"""

from __future__ import annotations

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB

PURPOSES = {"balance": 0x42414C414E4345, "split": 0x53504C4954, "hop_mix": 0x484F50}


def salt(seed: int, purpose: str) -> int:
    """The 64-bit starting state for one purpose ("balance", "split", "hop_mix") and seed."""
    return mix64(((seed & MASK) * GOLDEN + PURPOSES[purpose]) & MASK)


def mix64(x: int) -> int:
    """SplitMix64's finalizer on one 64-bit integer."""
    x &= MASK
    x = ((x ^ (x >> 30)) * _C1) & MASK
    x = ((x ^ (x >> 27)) * _C2) & MASK
    return x ^ (x >> 31)


def key_of(state: int, rank: int) -> int:
    """Key of the record at ``rank`` (0-based) for a salt ``state``."""
    return mix64(state + (rank + 1) * GOLDEN)


def keys_of(state: int, ranks: np.ndarray) -> np.ndarray:
    """Vectorized :func:`key_of` over an integer array of ranks (uint64 result)."""
    x = np.uint64(state) + (ranks.astype(np.uint64) + np.uint64(1)) * np.uint64(GOLDEN)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_C1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_C2)
    return x ^ (x >> np.uint64(31))
