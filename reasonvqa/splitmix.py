"""SplitMix64 (Steele, Lea and Flood, 2014) over numpy uint64 arrays.

Seeded draws that are bit for bit the same on every platform and numpy version, unlike
``numpy.random`` streams, whose algorithms may change between releases.
"""

from __future__ import annotations

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment, 2^64 / golden ratio
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer, elementwise over uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = np.asarray(x).astype(np.uint64)  # a copy (negative ints wrap), mixed in place: fewer temporaries
        z ^= z >> np.uint64(30)
        z *= _C1
        z ^= z >> np.uint64(27)
        z *= _C2
        z ^= z >> np.uint64(31)
        return z if z.ndim else z[()]


def splitmix64(x: np.ndarray) -> np.ndarray:
    """One SplitMix64 step from each state in ``x``: the finalizer of ``x + GOLDEN``."""
    with np.errstate(over="ignore"):
        return mix64(np.asarray(x).astype(np.uint64) + np.uint64(GOLDEN))
