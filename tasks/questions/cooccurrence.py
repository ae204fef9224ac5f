"""Label co-occurrence over the build's corpus, for absence claims (tasks/questions/absence.py).

The corpus's distinct (image, label) pairs are coded once into ``X`` (images x labels, binary, scipy.sparse)
and ``C = X^T X`` (labels x labels): ``C[s, x]`` images hold both ``s`` and ``x``, ``C[s, s]`` hold ``s``. For
an image with label set ``S`` and a label ``x`` not in ``S``, the estimate that ``x`` is present is the largest
over ``s`` in ``S`` of the rule of succession ``(C[s, x] + 1) / (C[s, s] + 2)``: the image's label that most
suggests ``x`` (ties: the first label). A label ``s`` gives every ``x`` at least ``1 / (C[s, s] + 2)``, so for an
absence claim (``estimates(..., min_images=m)``) labels held by fewer than ``m`` images abstain and only the
others take part in the maximum (``least_images``: the least ``m`` whose ``1 / (m + 2)`` is below the threshold);
otherwise one rare label of the image would block every claim. The ranking's *floor* is ``1 / (min C[s, s] + 2)``,
the estimate of a label never seen with any of the image's labels.

Cost is linear in the corpus: ``C`` once (the pairs times the labels per image), then per image one lookup of
``C`` per (asked label, label of the image), and for the ranking the first entries of its labels' rows of
``C`` sorted by estimate; never a dense images x labels matrix, no Python loop per image or pair.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import sparse


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(a, a + n) for a, n in zip(starts, lengths)])`` as one vectorized index."""
    return np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))


def _codes(values: pl.Series, vocabulary: pl.Series) -> np.ndarray:
    """Each value's position in the sorted ``vocabulary`` (-1 if absent)."""
    return values.replace_strict(vocabulary, pl.int_range(vocabulary.len(), eager=True), default=-1,
                                 return_dtype=pl.Int64).to_numpy()


def least_images(threshold: float) -> int:
    """The least image count ``m`` of a label whose floor ``1 / (m + 2)`` is below ``threshold`` (a label held by
    fewer images gives every estimate at least the threshold, so it cannot back an improbability)."""
    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    m = max(0, int(1 / threshold) - 3)
    while 1 / (m + 2) >= threshold:  # exact comparison as the claim makes it, whatever 1 / threshold rounds to
        m += 1
    return m


class Cooccurrence:
    """The corpus's (image_id, label) pairs coded as ``X`` and their co-occurrence counts ``C = X^T X``."""

    def __init__(self, pairs: pl.DataFrame) -> None:
        self.images = pairs["image_id"].unique().sort()
        self.labels = pairs["label"].unique().sort()
        n_labels = self.labels.len()
        image, label = _codes(pairs["image_id"], self.images), _codes(pairs["label"], self.labels)
        x = sparse.csr_array((np.ones(len(image), np.int32), (image, label)), shape=(self.images.len(), n_labels))
        x.sum_duplicates()
        x.data[:] = 1  # binary: a repeated pair counts once
        x.sort_indices()  # each image's labels in label order: ties of the maximum go to the first label
        self.x = x
        c = (x.T @ x).tocsr()
        c.sort_indices()
        self.c = c
        self.held = c.diagonal().astype(np.int64)  # images per label
        self.widest = int(np.diff(x.indptr).max(initial=0))  # most labels of one image
        rows = np.repeat(np.arange(n_labels, dtype=np.int64), np.diff(c.indptr))
        self._keys = rows * n_labels + c.indices  # row-major and sorted: C's entries for searchsorted
        self._ranked: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _label_sets(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per image code, how many labels it holds, and their codes concatenated (each image's in label order)."""
        starts = self.x.indptr[codes]
        lengths = self.x.indptr[codes + 1] - starts
        return lengths, self.x.indices[_ranges(starts, lengths)].astype(np.int64)

    def _counts(self, given: np.ndarray, label: np.ndarray) -> np.ndarray:
        """``C[given, label]`` elementwise (0 where ``label`` is -1, not in the corpus)."""
        if len(self._keys) == 0:
            return np.zeros(len(given), np.int64)
        keys = given * self.labels.len() + label
        at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return np.where((label >= 0) & (self._keys[at] == keys), self.c.data[at], 0).astype(np.int64)

    def estimates(self, asked: pl.DataFrame, min_images: int = 0) -> pl.DataFrame:
        """``asked`` (image_id, label, ...) with ``p`` (the estimate over the image's labels held by at least
        ``min_images`` images; the others abstain), ``given`` (the label giving it), ``given_images``
        (C[given, given]), ``with_label`` (C[given, label]), ``taking_part`` and ``abstaining`` (how many of the
        image's labels), in ``asked``'s order; all null for an image without labels in the corpus, the first four
        null for one whose labels all abstain."""
        columns = {"p": pl.Float64, "given": pl.String, "given_images": pl.Int64, "with_label": pl.Int64,
                   "taking_part": pl.Int64, "abstaining": pl.Int64}
        image = _codes(asked["image_id"], self.images)
        rows = np.flatnonzero(image >= 0)
        if len(rows) == 0:
            return asked.with_columns(*(pl.lit(None, dtype).alias(name) for name, dtype in columns.items()))
        lengths, given = self._label_sets(image[rows])
        label = np.repeat(_codes(asked["label"], self.labels)[rows], lengths)
        with_label = self._counts(given, label)
        part = self.held[given] >= min_images
        p = np.where(part, (with_label + 1) / (self.held[given] + 2), -1.0)  # -1: abstains, below every estimate
        starts = np.cumsum(lengths) - lengths
        best = np.maximum.reduceat(p, starts)
        taking_part = np.add.reduceat(part.astype(np.int64), starts)
        # the first (label-ordered) of each row's maxima; every row has one, so the first hit per row is its own
        hits = np.flatnonzero(p == np.repeat(best, lengths))
        owner = np.repeat(np.arange(len(rows)), lengths)[hits]
        first = hits[np.r_[True, owner[1:] != owner[:-1]]]
        found = pl.DataFrame({"_row": rows, "p": best, "given": self.labels.gather(given[first]),
                              "given_images": self.held[given[first]], "with_label": with_label[first],
                              "taking_part": taking_part, "abstaining": lengths - taking_part},
                             schema={"_row": pl.Int64, **columns})
        none = pl.col("taking_part") == 0
        found = found.with_columns(*(pl.when(none).then(None).otherwise(pl.col(name)).alias(name)
                                     for name in ("p", "given", "given_images", "with_label")))
        return asked.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64)).join(
            found, on="_row", how="left", maintain_order="left").drop("_row")

    def taking_part(self, images: list[str], min_images: int) -> np.ndarray:
        """Per image, how many of its labels ``min_images`` images hold (0 for an image without labels)."""
        image = _codes(pl.Series(images, dtype=pl.String), self.images)
        out = np.zeros(len(image), np.int64)
        known = np.flatnonzero(image >= 0)
        if len(known):
            lengths, given = self._label_sets(image[known])
            part = (self.held[given] >= min_images).astype(np.int64)
            out[known] = np.add.reduceat(part, np.cumsum(lengths) - lengths)
        return out

    def floors(self, images: list[str]) -> np.ndarray:
        """Each image's floor ``1 / (min C[s, s] + 2)`` over its labels (1.0 for an image without labels)."""
        image = _codes(pl.Series(images, dtype=pl.String), self.images)
        out = np.ones(len(image))
        known = np.flatnonzero(image >= 0)
        if len(known):
            lengths, given = self._label_sets(image[known])
            out[known] = 1 / (np.minimum.reduceat(self.held[given], np.cumsum(lengths) - lengths) + 2)
        return out

    def _sorted_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """C's entries per row by count descending then label (in a row, by estimate), at C's indptr: their labels,
        counts, and increasing keys ``row * (top + 2) + top - count`` (``top`` the largest count) for searching."""
        if self._ranked is None:
            rows = np.repeat(np.arange(self.labels.len(), dtype=np.int64), np.diff(self.c.indptr))
            top = int(self.held.max(initial=0))
            keys = rows * (top + 2) + top - self.c.data
            order = np.argsort(keys, kind="stable")  # stable: ties stay in label order (C's indices are sorted)
            self._ranked = (self.c.indices[order].astype(np.int64), self.c.data[order].astype(np.int64), keys[order])
        return self._ranked

    def ranked(self, images: list[str], cap: int) -> pl.DataFrame:
        """(image_id, label, p) of at most ``cap`` labels per image, not its own, whose estimate is above the
        image's floor (so co-occurring with one of its labels), by estimate descending then label; images in
        ``images``' order."""
        out_schema = {"image_id": pl.String, "label": pl.String, "p": pl.Float64}
        image = _codes(pl.Series(images, dtype=pl.String), self.images)
        image = image[image >= 0]
        if len(image) == 0 or cap <= 0:
            return pl.DataFrame(schema=out_schema)
        lengths, given = self._label_sets(image)
        owner = np.repeat(np.arange(len(image)), lengths)
        least = np.minimum.reduceat(self.held[given], np.cumsum(lengths) - lengths)[owner]  # min C[s, s] of the image
        labels, counts, keys = self._sorted_rows()
        # in row s, (C[s, x] + 1) / (C[s, s] + 2) > 1 / (least + 2) iff C[s, x] >= (C[s, s] + 2) // (least + 2); and a
        # label among an image's top ``cap`` has, in the row of the label giving its estimate, at most cap - 1 + len(S)
        # entries before it (better labels, or the image's own): those prefixes hold the answer
        top = int(self.held.max(initial=0))
        starts = self.c.indptr[given]
        above = np.searchsorted(keys, given * (top + 2) + top - (self.held[given] + 2) // (least + 2), side="right") - starts
        taken = np.minimum(above, cap + lengths[owner])
        # a full prefix holds ``cap`` labels not the image's at or above its last estimate, so the image's top ``cap``
        # are at or above the largest such: cut every prefix there (a hair lower, never too short)
        held = self.held[given] + 2
        full = taken == cap + lengths[owner]
        last = (counts[starts + np.maximum(taken, 1) - 1] + 1) / held
        bound = np.maximum.reduceat(np.where(full, last, 0), np.cumsum(lengths) - lengths)[owner]
        least_count = np.maximum(np.floor(bound * held * (1 - 1e-9)) - 1, 0).astype(np.int64)
        taken = np.minimum(taken, np.searchsorted(keys, given * (top + 2) + top - least_count, side="right") - starts)
        at = _ranges(starts, taken)
        image_of, label = np.repeat(owner, taken), labels[at]
        n_labels = self.labels.len()
        keep = ~np.isin(image_of * n_labels + label, owner * n_labels + given)
        image_of, label, given = image_of[keep], label[keep], np.repeat(given, taken)[keep]
        p = (counts[at[keep]] + 1) / (self.held[given] + 2)
        top_rows = (pl.DataFrame({"image": image_of, "label": label, "p": p})
                    .group_by("image", "label").agg(pl.max("p"))
                    .sort(["image", "p", "label"], descending=[False, True, False])
                    .group_by("image", maintain_order=True).head(cap))
        return pl.DataFrame({"image_id": self.images.gather(image[top_rows["image"].to_numpy()]),
                             "label": self.labels.gather(top_rows["label"].to_numpy()), "p": top_rows["p"]},
                            schema=out_schema)
