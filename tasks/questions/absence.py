"""What backs an absence claim: the choice of absent labels and the basis each one carries.

A hallucination question states that something is absent. Visual Genome does not annotate
every object in a picture, so "no X in the image" is true only where something stronger than
"X is not among the annotations" backs it. Every hallucination row names its basis in
``absence_basis`` and the particulars in ``absence_evidence`` (sorted-key JSON); a row without a
basis (null) is never released (balancing sets it aside as ``no_absence_basis``, kept in the
pool for review), and ``balance.absence_bases`` (``--absence-basis``) says which bases a release
takes.

Bases of absent objects, strongest first (``ABSENT_OBJECT_BASES``; every name in ``reasonvqa/absence_bases.py``):

- ``taxonomy``: the image's source annotates that class exhaustively (nuScenes' own categories,
  a source config's ``exhaustive_labels``); evidence ``{"taxonomy": <source kind>, "classes": n}``.
  Only classes of that taxonomy are ever claimed absent from such an image (never "no sidewalk"
  on a nuScenes frame). A Visual Genome image that is a COCO image found in the COCO instances files
  of its config has a taxonomy of its own, the COCO categories not annotated on it (coco_taxonomy.py;
  evidence ``{"taxonomy": "coco", "coco_id": ..., "classes": 80}``), which takes the place of its source's.
- ``review``: a human decision imported from review (annotation_exports); evidence the decision id.
- ``detector``: a detector's negative at a stated threshold: a class the proposals stage prompted and
  found no box for (detector_negatives.py, applied after ``absent_labels``).
- ``cooccurrence`` (weakest): the label is improbable for the scene by corpus co-occurrence
  (tasks/questions/cooccurrence.py): of the C[s, s] corpus images holding a label s of this image, C[s, x]
  also hold x; the estimate is the largest over the image's labels of the rule of succession
  (C[s, x] + 1) / (C[s, s] + 2) (the label that most suggests x) and must be below ``absence_probability``.
  A label held by few images gives every x at least 1 / (C[s, s] + 2), so it could never push the estimate
  below the threshold: labels held by fewer than m images (m the least count with 1 / (m + 2) below the
  threshold; 19 at 0.05) abstain, and only the others take part in the maximum; an image whose labels all
  abstain gets no such claim. Evidence: the estimate, threshold, the label ``given``, ``given_images`` = C[s, s],
  ``with_label`` = C[s, x], and how many of the image's labels were ``taking_part`` and ``abstaining``.

The most co-occurring absent labels (those most likely present but unannotated: the same estimate, highest
first, ties by label, only labels above the image's floor 1 / (min C[s, s] + 2), i.e. suggested by one of its
labels) are still made for images without a taxonomy, with a null basis: set aside, exportable for review, and
released once a reviewer confirms it (basis ``review``). Taxonomy classes are ranked by the same estimate.

Bases of the other hallucination forms: wrong attributes ``annotated_attribute`` (the subject's
annotated value of the asked family contradicts the asked word); impossible relations
``refuting_boxes`` (the boxes refute the predicate by the spatial margin) or
``annotated_relation`` (an annotated relation of an excluded family holds); VLM negatives
``vlm`` (the model's judgement from the pixels, checked against the annotations).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa

from reasonvqa.tasks.questions.coco_taxonomy import ImageTaxonomy
from reasonvqa.tasks.questions.cooccurrence import Cooccurrence, least_images

ROW_BUDGET = 5_000_000  # co-occurrence candidate rows held at once (absent_labels)
_LAST: dict[tuple[int, int], Cooccurrence] = {}
_LAST_LOCK = threading.Lock()


@dataclass(frozen=True)
class AbsentLabel:
    """A label to claim absent from an image, with its basis (None: unbased) and the basis's particulars."""

    label: str
    basis: str | None
    evidence: dict = field(default_factory=dict, compare=False)


def source_of(image_id: str) -> str:
    """The source kind of a stable image id (``vg:1`` -> ``vg``)."""
    return image_id.partition(":")[0]


def corpus_taxonomies(corpus: pa.Table, declared: dict[str, list[str] | None]) -> dict[str, list[str]]:
    """source kind -> the labels its annotations cover exhaustively: the declared list, or (None: the source's
    own categories) every label its images carry in ``corpus`` (so never a class the source does not annotate)."""
    out = {kind: sorted(set(labels)) for kind, labels in declared.items() if labels is not None}
    own = [kind for kind, labels in declared.items() if labels is None]
    if own and corpus.num_rows:
        frame = cast(pl.DataFrame, pl.from_arrow(corpus)).with_columns(source=pl.col("image_id").str.split(":").list.first())
        for kind in own:
            out[kind] = sorted(set(frame.filter(pl.col("source") == kind)["label"].to_list()))
    return {kind: labels for kind, labels in sorted(out.items()) if labels}


def _stable_rank(values: list[str], salt: str) -> list[int]:
    return [int.from_bytes(hashlib.blake2b(f"{salt}\x1f{v}".encode(), digest_size=8).digest(), "big") for v in values]


def absent_labels(corpus: pa.Table, images: list[str], per_image: int, taxonomies: dict[str, list[str]],
                  threshold: float, min_label_images: int = 2, *,
                  image_taxonomies: dict[str, ImageTaxonomy] | None = None) -> dict[str, list[AbsentLabel]]:
    """image -> labels to claim absent, each with its basis (see the module docstring), at most ``3 * per_image``
    per basis: taxonomy classes (most co-occurring first) for images of a source with a taxonomy; else the most
    co-occurring labels (unbased) and labels improbable for the scene (``cooccurrence``, drawn in a stable hash
    order from the labels that ``min_label_images`` images of the source hold).

    ``corpus`` holds (image_id, label) of every image of the build (regions.image_labels). Labels present in the
    image (exactly) are never returned; the caller checks whole-word containment (hallucination.is_absent).
    ``image_taxonomies``: image -> a taxonomy of its own (coco_taxonomy.image_taxonomies), before its source's.
    """
    if corpus.num_rows == 0 or not images or per_image == 0:
        return {}
    pairs = cast(pl.DataFrame, pl.from_arrow(corpus.select(["image_id", "label"]))).unique()
    common = _common_vocabulary(pairs, min_label_images)
    cooccurrence = _cooccurrence(pairs)
    # per image at most (its labels) x (ranked prefix + taxonomy classes) candidate rows: a few images at a time,
    # memory stays near ROW_BUDGET rows whatever the corpus size (the answer of each image is its own)
    widest = max(1, cooccurrence.widest)
    step = max(1, ROW_BUDGET // (widest * (3 * per_image + widest + max(map(len, taxonomies.values()), default=0))))
    out: dict[str, list[AbsentLabel]] = {}
    for start in range(0, len(images), step):
        out.update(_absent_chunk(pairs, common, cooccurrence, images[start:start + step], 3 * per_image, taxonomies,
                                 threshold, image_taxonomies or {}))
    return out


def _cooccurrence(pairs: pl.DataFrame) -> Cooccurrence:
    """The corpus's co-occurrence counts, kept for the next call of this process: every shard of a build reads the
    same build-wide corpus, so a worker builds them once (keyed by the pairs' count and order-free row hash sum)."""
    key = (pairs.height, int(pairs.hash_rows(seed=0).to_numpy().sum(dtype=np.uint64)))
    with _LAST_LOCK:
        if key not in _LAST:
            _LAST.clear()  # one corpus at a time: its counts are the largest thing here
            _LAST[key] = Cooccurrence(pairs)
        return _LAST[key]


def _absent_chunk(pairs: pl.DataFrame, common: pl.DataFrame, cooccurrence: Cooccurrence, images: list[str], cap: int,
                  taxonomies: dict[str, list[str]], threshold: float,
                  own: dict[str, ImageTaxonomy]) -> dict[str, list[AbsentLabel]]:
    """``absent_labels`` for some of the images."""
    mine = pairs.filter(pl.col("image_id").is_in(images))
    out: dict[str, list[AbsentLabel]] = {}
    with_taxonomy = [i for i in images if source_of(i) in taxonomies or i in own]
    if with_taxonomy:
        classes = pl.DataFrame([(i, label) for i in with_taxonomy
                                for label in (own[i].labels if i in own else taxonomies[source_of(i)])],
                               schema={"image_id": pl.String, "label": pl.String}, orient="row")
        ranked = (cooccurrence.estimates(classes.join(mine, on=["image_id", "label"], how="anti"))
                  .with_columns(pl.col("p").fill_null(0)).sort(["image_id", "p", "label"], descending=[False, True, False])
                  .group_by("image_id", maintain_order=True).head(cap))
        for image_id, label in ranked.select("image_id", "label").iter_rows():
            kind = source_of(image_id)
            evidence = own[image_id].evidence if image_id in own else {"taxonomy": kind, "classes": len(taxonomies[kind])}
            out.setdefault(image_id, []).append(AbsentLabel(label, "taxonomy", evidence))
    others = [i for i in images if source_of(i) not in taxonomies and i not in own]
    if not others:
        return out
    improbable = _improbable(common, mine, cooccurrence, others, cap, threshold)
    for image_id, label, p, given, given_images, with_label, taking_part, abstaining in improbable:
        out.setdefault(image_id, []).append(AbsentLabel(label, "cooccurrence", {
            "probability": round(p, 6), "threshold": threshold, "given": given, "given_images": given_images,
            "with_label": with_label, "taking_part": taking_part, "abstaining": abstaining,
            "estimate": "(with_label + 1) / (given_images + 2): of the given_images corpus images holding the image's "
                        "label given, with_label hold this one; the largest over the image's labels taking part (held "
                        "by enough images that 1 / (images + 2) is below the threshold; the rarer abstain)"}))
    # the most co-occurring absent labels: the ones most likely present but unannotated, so unbased
    based = pl.DataFrame([(i, label) for i, label, *_ in improbable], schema={"image_id": pl.String, "label": pl.String},
                         orient="row")
    top = cooccurrence.ranked(others, cap).join(based, on=["image_id", "label"], how="anti", maintain_order="left")
    for image_id, label in top.select("image_id", "label").iter_rows():
        out.setdefault(image_id, []).append(AbsentLabel(label, None))
    return out


def _common_vocabulary(pairs: pl.DataFrame, min_label_images: int) -> pl.DataFrame:
    """(source, label, rank, size) of the labels ``min_label_images`` images of a source hold, ranked per source in
    a stable hash order (``size``: the source's vocabulary size)."""
    common = (pairs.with_columns(source=pl.col("image_id").str.split(":").list.first())
              .group_by("source", "label").agg(images=pl.len()).filter(pl.col("images") >= min_label_images))
    if common.is_empty():
        return common
    common = common.with_columns(key=pl.Series(_stable_rank(common["label"].to_list(), "absent-vocabulary"), dtype=pl.UInt64))
    return common.sort(["source", "key", "label"]).with_columns(rank=pl.int_range(pl.len()).over("source"),
                                                               size=pl.len().over("source"))


def _improbable(common: pl.DataFrame, mine: pl.DataFrame, cooccurrence: Cooccurrence, images: list[str], cap: int,
                threshold: float) -> list[tuple[str, str, float, str, int, int, int, int]]:
    """(image, label, estimate, given, given_images, with_label, taking_part, abstaining) of labels whose estimate
    over the image's labels taking part (``Cooccurrence.estimates``' ``min_images``) is below ``threshold``: a
    window of ``cap`` labels of the image's source vocabulary (``_common_vocabulary``), at a stable hash offset of
    the image, in hash order."""
    if common.is_empty() or threshold <= 0:
        return []
    least = least_images(threshold)
    # an image none of whose labels takes part has no improbable label: skipped
    images = [i for i, n in zip(images, cooccurrence.taking_part(images, least)) if n > 0]
    if not images:
        return []
    sizes = dict(common.group_by("source").agg(pl.first("size")).iter_rows())
    sources = [source_of(i) for i in images]
    size = np.array([sizes.get(kind, 0) for kind in sources], dtype=np.int64)
    start = np.array(_stable_rank(images, "absent-window"), dtype=np.uint64) % np.maximum(size, 1).astype(np.uint64)
    n = np.minimum(cap, size)
    if n.sum() == 0:
        return []
    row = np.repeat(np.arange(len(images)), n)
    at = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    window = pl.DataFrame({"image_id": pl.Series(images, dtype=pl.String).gather(row),
                           "source": pl.Series(sources, dtype=pl.String).gather(row),
                           "rank": (start.astype(np.int64)[row] + at) % size[row], "at": at},
                          schema={"image_id": pl.String, "source": pl.String, "rank": pl.Int64, "at": pl.Int64})
    asked = (window.join(common.select("source", "rank", "label").with_columns(pl.col("rank").cast(pl.Int64)),
                         on=["source", "rank"])
             .join(mine, on=["image_id", "label"], how="anti"))
    found = cooccurrence.estimates(asked, least).filter(pl.col("p") < threshold).sort(["image_id", "at"])
    return list(found.select("image_id", "label", "p", "given", "given_images", "with_label", "taking_part",
                             "abstaining").iter_rows())
