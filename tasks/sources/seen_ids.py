"""A compact set of 64-bit ids for duplicate checks over millions of rows.

Ids live in a few sorted numpy arrays whose sizes at least double from last to first
(merged as they fill), so a batch lookup is a handful of binary searches and adding n
ids costs O(n log n) overall: 4.1 M GLDv2 ids take ~33 MB instead of ~250 MB as a
Python set of ints.
"""

from __future__ import annotations

import numpy as np


def sorted_unique(ids: np.ndarray) -> np.ndarray:
    """``np.unique(ids)`` by sorting: NumPy 2.3+ hashes in ``np.unique``, several times slower
    than a sort on millions of 64-bit ids."""
    ids = np.sort(ids)
    if ids.size < 2:
        return ids
    return ids[np.concatenate(([True], ids[1:] != ids[:-1]))]


class SeenIds:
    """Add batches of uint64 ids; each batch reports which ids were already seen."""

    def __init__(self) -> None:
        self._levels: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(level.size for level in self._levels)

    def contains(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``ids`` are in the set."""
        ids = np.asarray(ids, dtype=np.uint64)
        found = np.zeros(ids.shape, dtype=bool)
        for level in self._levels:
            where = np.searchsorted(level, ids)
            where[where == level.size] = 0
            found |= level[where] == ids
        return found

    def add_batch(self, ids: np.ndarray) -> np.ndarray:
        """Add ``ids`` (in order) and return the mask of those seen before or earlier in the batch."""
        ids = np.asarray(ids, dtype=np.uint64)
        seen = self.contains(ids)
        order = np.argsort(ids, kind="stable")
        repeated = np.zeros(ids.shape, dtype=bool)
        repeated[order[1:]] = ids[order[1:]] == ids[order[:-1]]  # an equal id earlier in the batch
        seen |= repeated
        new = np.sort(ids[~seen])
        if new.size:
            self._levels.append(new)
            while len(self._levels) > 1 and self._levels[-2].size <= 2 * self._levels[-1].size:
                top = self._levels.pop()
                # levels are disjoint and sorted: a stable (run-merging) sort is their union
                self._levels[-1] = np.sort(np.concatenate([self._levels[-1], top]), kind="stable")
        return seen
