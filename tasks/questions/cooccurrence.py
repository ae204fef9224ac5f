"""Label co-occurrence over the build's corpus, for absence claims (tasks/questions/absence.py).

For an image ``i``, its *scenes* are the other corpus images sharing at least one label with it
(``n`` of them), and ``k(i, label)`` is how many of those scenes hold ``label``. With Visual Genome's
common labels ("man", "window", "tree") nearly every image shares one with every other, so a relational
join (image x neighbours x their labels) grows as images x corpus x labels per image. Here the corpus is
coded once into integer pairs sorted both ways; an image costs what its neighbours hold: the union of its
labels' image lists, then one gather of those images' labels and a count (``bincount`` over the vocabulary
when they are many, ``unique`` when few, as for a landmark photo whose only label is its landmark).
"""

from __future__ import annotations

import numpy as np
import polars as pl


class Cooccurrence:
    """The corpus's (image_id, label) pairs (distinct), coded for ``scenes_and_scores``."""

    def __init__(self, pairs: pl.DataFrame) -> None:
        self.images = pairs["image_id"].unique().sort()
        self.labels = pairs["label"].unique().sort()
        self.image_code = {image_id: code for code, image_id in enumerate(self.images.to_list())}
        coded = pairs.select(
            image=pl.col("image_id").replace_strict(self.images, pl.int_range(self.images.len(), eager=True),
                                                    return_dtype=pl.Int64),
            label=pl.col("label").replace_strict(self.labels, pl.int_range(self.labels.len(), eager=True),
                                                 return_dtype=pl.Int64))
        self.pair_image, self.pair_label = coded["image"].to_numpy(), coded["label"].to_numpy()
        by_label = np.argsort(self.pair_label, kind="stable")
        self.label_images = self.pair_image[by_label]
        self.label_start = np.searchsorted(self.pair_label[by_label], np.arange(self.labels.len() + 1))
        by_image = np.argsort(self.pair_image, kind="stable")
        self.image_labels = self.pair_label[by_image]
        self.image_start = np.searchsorted(self.pair_image[by_image], np.arange(self.images.len() + 1))

    def scenes_and_scores(self, images: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
        """``(image_id, n)`` of the images with at least one scene, and ``(image_id, label, k)`` for every k > 0
        (both counts UInt32). Images not in the corpus have neither."""
        n_labels = self.labels.len()
        scene_ids: list[str] = []
        scene_n: list[int] = []
        rows: list[np.ndarray] = []
        held_labels: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for image_id in images:
            code = self.image_code.get(image_id)
            if code is None:
                continue
            own = self.image_labels[self.image_start[code]:self.image_start[code + 1]]
            neighbours = np.unique(np.concatenate([self.label_images[self.label_start[label]:self.label_start[label + 1]]
                                                   for label in own]))
            neighbours = neighbours[neighbours != code]
            if len(neighbours) == 0:
                continue
            # the neighbours' labels: their slices of the image-sorted pairs, gathered in one index
            starts, lengths = self.image_start[neighbours], self.image_start[neighbours + 1] - self.image_start[neighbours]
            offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
            labels = self.image_labels[offsets]
            if len(labels) > n_labels:  # many neighbours (a common label): count over the whole vocabulary
                k = np.bincount(labels, minlength=n_labels)
                held = np.flatnonzero(k)
                k = k[held]
            else:
                held, k = np.unique(labels, return_counts=True)
            rows.append(np.full(len(held), len(scene_ids)))
            scene_ids.append(image_id)
            scene_n.append(len(neighbours))
            held_labels.append(held)
            counts.append(k)
        scenes = pl.DataFrame({"image_id": scene_ids, "n": scene_n}, schema={"image_id": pl.String, "n": pl.UInt32})
        if not rows:
            return scenes, pl.DataFrame(schema={"image_id": pl.String, "label": pl.String, "k": pl.UInt32})
        scores = pl.DataFrame({"image_id": pl.Series(scene_ids, dtype=pl.String).gather(np.concatenate(rows)),
                               "label": self.labels.gather(np.concatenate(held_labels)),
                               "k": pl.Series(np.concatenate(counts), dtype=pl.UInt32)})
        return scenes, scores
