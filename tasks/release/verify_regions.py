"""Release checks of the regions table and of the questions' pixel evidence.

- regions: unique ids, boxes with non-negative size, masks that are COCO RLE (``size`` [h, w] > 0,
  a counts string pycocotools reads whose runs cover exactly the h x w image: ``masks.coco_area``);
- every question's ``evidence_region_ids`` name regions of the question's own image;
- hallucination questions have empty evidence; other grounded questions have some;
- a counting question of kind ``grounded`` answers with the number of its evidence regions.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import masks
from reasonvqa.codes import combined
from reasonvqa.schemas import GROUNDED_KINDS

MAX_LISTED = 5


def check_regions(regions: pa.Table) -> list[str]:
    """Problems of the regions table itself."""
    problems = []
    if pc.count_distinct(regions["region_id"]).as_py() != regions.num_rows:
        problems.append("regions: duplicate region_id")
    bad_box = pc.sum(pc.or_(pc.less(pc.fill_null(regions["w"], -1), 0), pc.less(pc.fill_null(regions["h"], -1), 0))).as_py()
    if bad_box:
        problems.append(f"regions: {bad_box} regions without a box of non-negative size")
    bad = []
    for rid, mask in zip(regions["region_id"].to_pylist(), regions["mask"].to_pylist()):
        if mask is None:
            continue
        try:
            masks.coco_area(mask)
        except masks.MaskError:
            bad.append(rid)
    if bad:
        problems.append(f"regions: {len(bad)} masks that are not COCO RLE (first: {bad[:MAX_LISTED]})")
    return problems


EVIDENCE_CHECKS = ("evidence regions missing from regions/", "evidence regions of another image",
                   "hallucination questions with evidence", "grounded questions without evidence",
                   "counting answers that are not the number of evidence regions")


class EvidenceTally:
    """The evidence checks added up over parts of a split, counted in Arrow: "missing" and "another image" count
    evidence ids (a question may have several), the other checks count questions; each problem lists the first
    question ids in order. A null evidence list is empty; of a region id listed twice, the first row counts."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(EVIDENCE_CHECKS, 0)
        self.first: dict[str, list[str]] = {what: [] for what in EVIDENCE_CHECKS}

    def add(self, questions: pa.Table, regions: pa.Table | None) -> None:
        if "evidence_region_ids" not in questions.column_names:
            return
        for what, flagged in zip(EVIDENCE_CHECKS, _flagged(questions, regions)):
            if len(flagged):
                self.counts[what] += len(flagged)
                self.first[what] = _first_ids(pa.concat_arrays([pa.array(self.first[what], pa.string()),
                                                                flagged.cast(pa.string())]))

    def problems(self, split: str) -> list[str]:
        return [f"{split}: {self.counts[what]} {what} (first: {self.first[what]})"
                for what in EVIDENCE_CHECKS if self.counts[what]]


def _flagged(questions: pa.Table, regions: pa.Table | None) -> list[pa.Array]:
    """Per EVIDENCE_CHECKS entry, the question ids it flags (one per evidence id for the first two)."""
    evidence = combined(questions["evidence_region_ids"])
    has = pc.greater(pc.fill_null(pc.list_value_length(evidence), 0), 0)
    halluc = pc.fill_null(combined(questions["is_hallucination"]), False)
    kind = combined(questions["kind"])
    ids = combined(questions["question_id"])
    # one entry per evidence id: where it is in the regions table (null: missing) and whether its image is the question's
    # owners from the lengths: a null list slot may still span values, which list_flatten skips but
    # list_parent_indices would count
    lengths = pc.fill_null(pc.list_value_length(evidence), 0).to_numpy(zero_copy_only=False)
    flat, owner = pc.list_flatten(evidence), pa.array(np.repeat(np.arange(len(evidence)), lengths))
    if regions is not None and regions.num_rows:
        found = pc.index_in(flat, value_set=combined(regions["region_id"]), skip_nulls=True)
        region_image = pc.take(combined(regions["image_id"]), found)
        question_image = pc.take(combined(questions["image_id"]), owner)
        same = pc.or_kleene(pc.equal(region_image, question_image), pc.and_(pc.is_null(region_image), pc.is_null(question_image)))
        foreign = pc.and_(pc.is_valid(found), pc.invert(pc.fill_null(same, False)))
        missing = pc.is_null(found)
    else:
        foreign, missing = pa.repeat(pa.scalar(False), len(flat)), pa.repeat(pa.scalar(True), len(flat))
    not_halluc = pc.invert(halluc)
    grounded = pc.fill_null(pc.is_in(kind, value_set=pa.array(GROUNDED_KINDS)), False)
    counting = pc.fill_null(pc.and_(pc.equal(kind, "grounded"), pc.equal(combined(questions["task_type"]), "counting")), False)
    number = pc.cast(pc.fill_null(pc.list_value_length(evidence), 0), pa.string())
    right_count = pc.fill_null(pc.equal(combined(questions["answer"]), number), False)
    return [pc.take(ids, pc.filter(owner, missing)), pc.take(ids, pc.filter(owner, foreign)),
            pc.filter(ids, pc.and_(halluc, has)),
            pc.filter(ids, pc.and_(pc.and_(grounded, not_halluc), pc.invert(has))),
            pc.filter(ids, pc.and_(pc.and_(counting, not_halluc), pc.invert(right_count)))]


def _first_ids(ids: pa.Array) -> list[str]:
    """The MAX_LISTED smallest distinct ids (byte order: Python's order of str)."""
    distinct = pc.drop_null(pc.unique(ids))
    return pc.take(distinct, pc.sort_indices(distinct)[:MAX_LISTED]).to_pylist()
