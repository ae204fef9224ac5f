"""COCO's 80 categories as an absence basis on Visual Genome images that are COCO images.

COCO annotates its 80 categories exhaustively, so on a VG image with a ``coco_id`` a category with no
COCO annotation is absent (basis ``taxonomy``, evidence ``{"taxonomy": "coco", "coco_id": ..., "classes":
80}``). The category sets come from the COCO instances files a VG source config names
(tasks/sources/coco_instances.py; the flow passes their table here).

``data/coco_categories.tsv`` (bundled, written for this project from WordNet 3.0's ``index.noun``): one
row per category, with its id and name as COCO spells them, the label a question names it by, its WordNet
3.0 synset, and ``blocking_synsets``: every name (``lemma.n.sense``) of that synset and of the synsets a
VG annotator may give the same thing ("table" for a COCO "dining table", "plant" for a "potted plant",
"phone" for a "cell phone", "man" for a "person"; "stop sign" has no WordNet 3.0 synset, street_sign.n.01
stands for it). Labels are chosen so that a question names the category's own synset (hallucination.py takes
a label's most frequent noun sense: "cellphone", "computer mouse", "television set", "pot plant"). Nine
have no such label: for banana, cake, toilet, hot dog and toaster the first sense is another object sense
of the same word (the question's words are right); traffic light, stop sign, kite and book have none
that is a physical object (a signal, a possession, a writing), and hallucination.py refuses them with
its reason.
A category is never claimed absent from an image whose own VG objects carry one of its
blocking synsets (VG may annotate a cup COCO missed), nor where its label is among the image's labels
(absence.py's anti-join).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import pyarrow as pa

from reasonvqa.paths import DATA_DIR

CATEGORIES_FILE = DATA_DIR / "coco_categories.tsv"


class CocoCategory(NamedTuple):
    id: int
    name: str  # as COCO spells it ("dining table", "hair drier")
    label: str  # what a question calls it
    synset: str
    blocking: frozenset[str]


@dataclass(frozen=True)
class ImageTaxonomy:
    """The classes an image's exhaustive annotations let a question claim absent, and the basis's evidence."""

    labels: tuple[str, ...]
    evidence: dict = field(compare=False)


@lru_cache(maxsize=1)
def categories() -> tuple[CocoCategory, ...]:
    """The bundled 80 COCO categories, by id."""
    with open(CATEGORIES_FILE, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return tuple(sorted((CocoCategory(int(r["id"]), r["name"], r["label"], r["synset"],
                                      frozenset(r["blocking_synsets"].split())) for r in rows), key=lambda c: c.id))


def image_taxonomies(coco: pa.Table | None, objects: pa.Table | None) -> dict[str, ImageTaxonomy]:
    """VG image_id -> the labels of the COCO categories not annotated on it by COCO (``coco``: the rows of
    coco_instances.COCO_TAXONOMY) whose blocking synsets none of its ``objects`` (OBJECTS rows) carry."""
    if coco is None or coco.num_rows == 0:
        return {}
    held: dict[str, set[str]] = {}
    if objects is not None and objects.num_rows:
        for image_id, synset, synsets in zip(objects["image_id"].to_pylist(), objects["synset"].to_pylist(),
                                             objects["synsets"].to_pylist()):
            held.setdefault(image_id, set()).update([synset] if synset else [], synsets or [])
    cats = categories()
    out = {}
    for image_id, coco_id, present in zip(coco["image_id"].to_pylist(), coco["coco_id"].to_pylist(),
                                          coco["category_ids"].to_pylist()):
        own, annotated = held.get(image_id, set()), set(present or [])
        labels = tuple(c.label for c in cats if c.id not in annotated and not (c.blocking & own))
        out[image_id] = ImageTaxonomy(labels, {"taxonomy": "coco", "coco_id": coco_id, "classes": len(cats)})
    return out
