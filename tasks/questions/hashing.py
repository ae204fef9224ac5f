"""Stable ids and seeded draws that do not depend on library versions or row order.

Ids: blake2b (hashlib) over a canonical key string, one call per question (about 0.7 us each; the
only per-row Python in question generation). polars' own ``hash`` is not stable across versions,
so it is never used for anything that reaches an output file.
Draws: splitmix64 over numpy uint64 arrays, seeded from the same digest, so every random choice
of a question (its distractors, the order of its choices) is a pure function of its id and the
build seed.
"""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from reasonvqa.splitmix import GOLDEN, splitmix64

ID_BYTES = 10  # 80-bit question ids, 20 hex characters
_DIGEST_BYTES = ID_BYTES + 8  # + 64 bits of seed
_GOLDEN = np.uint64(GOLDEN)


def digest_keys(keys: pl.Series) -> tuple[pl.Series, np.ndarray]:
    """blake2b of each key: (20-hex-character ids, uint64 seeds)."""
    b2 = hashlib.blake2b
    joined = b"".join([b2(k, digest_size=_DIGEST_BYTES).digest() for k in keys.cast(pl.Binary).to_list()])
    raw = np.frombuffer(joined, dtype=np.uint8).reshape(len(keys), _DIGEST_BYTES)
    ids = pl.Series(raw[:, :ID_BYTES].copy().view(f"S{ID_BYTES}").ravel()).bin.encode("hex")
    seeds = raw[:, ID_BYTES:].copy().view("<u8").ravel()
    return ids, seeds


def stable_rank(values: list[str]) -> np.ndarray:
    """A uint64 per string, for ordering values in a way that is stable but unrelated to their text."""
    b2 = hashlib.blake2b
    joined = b"".join([b2(v.encode(), digest_size=8).digest() for v in values])
    return np.frombuffer(joined, dtype="<u8").copy()


def draw(seeds: np.ndarray, stream: int) -> np.ndarray:
    """Independent uint64 draw number ``stream`` for each seed."""
    with np.errstate(over="ignore"):
        return splitmix64(seeds ^ (np.uint64(stream) * _GOLDEN))


def mix_seed(seeds: np.ndarray, build_seed: int) -> np.ndarray:
    """Combine per-question seeds with the build's seed."""
    return splitmix64(seeds ^ splitmix64(np.array([build_seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64)))


def below(u: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Map uint64 draws to integers in [0, m) (m > 0)."""
    return (u % m.astype(np.uint64)).astype(np.int64)


def sample3(m: np.ndarray, seeds: np.ndarray, stream: int = 1) -> np.ndarray:
    """Three distinct integers in [0, m) per row (requires m >= 3), shape (n, 3)."""
    a = below(draw(seeds, stream), m)
    b = below(draw(seeds, stream + 1), m - 1)
    b = b + (b >= a)
    c = below(draw(seeds, stream + 2), m - 2)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    c = c + (c >= lo)
    c = c + (c >= hi)
    return np.stack([a, b, c], axis=1)
