"""Release checks of the regions table and of the questions' pixel evidence.

- regions: unique ids, boxes with non-negative size, masks that are COCO RLE (``size`` [h, w] > 0,
  a counts string pycocotools reads, an area no larger than the image);
- every question's ``evidence_region_ids`` name regions of the question's own image;
- hallucination questions have empty evidence; other grounded questions have some;
- a counting question of kind ``grounded`` answers with the number of its evidence regions.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

GROUNDED_KINDS = ("grounded", "grounded_vlm")
MAX_LISTED = 5


def check_regions(regions: pa.Table) -> list[str]:
    """Problems of the regions table itself."""
    from pycocotools import mask as mask_utils

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
        size = mask.get("size") or []
        try:
            if len(size) != 2 or min(size) <= 0:
                raise ValueError("size")
            area = int(mask_utils.area({"size": list(size), "counts": mask["counts"].encode("ascii")}))
            if area > size[0] * size[1]:
                raise ValueError("area")
        except (ValueError, TypeError, AttributeError, UnicodeEncodeError):
            bad.append(rid)
    if bad:
        problems.append(f"regions: {len(bad)} masks that are not COCO RLE (first: {bad[:MAX_LISTED]})")
    return problems


def check_evidence(split: str, questions: pa.Table, regions: pa.Table | None) -> list[str]:
    """Problems of the evidence of one split's questions against the regions table."""
    if "evidence_region_ids" not in questions.column_names:
        return []
    rows = questions.select(["question_id", "image_id", "kind", "task_type", "answer", "evidence_region_ids",
                             "is_hallucination"]).to_pylist()
    image_of = dict(zip(regions["region_id"].to_pylist(), regions["image_id"].to_pylist())) if regions is not None else {}
    missing, foreign, halluc, empty, count = [], [], [], [], []
    for q in rows:
        evidence = q["evidence_region_ids"] or []
        for rid in evidence:
            if rid not in image_of:
                missing.append(q["question_id"])
            elif image_of[rid] != q["image_id"]:
                foreign.append(q["question_id"])
        if q["is_hallucination"] and evidence:
            halluc.append(q["question_id"])
        if q["kind"] in GROUNDED_KINDS and not q["is_hallucination"] and not evidence:
            empty.append(q["question_id"])
        if (q["kind"] == "grounded" and q["task_type"] == "counting" and not q["is_hallucination"]
                and q["answer"] != str(len(evidence))):
            count.append(q["question_id"])
    problems = []
    for what, ids in (("evidence regions missing from regions/", missing), ("evidence regions of another image", foreign),
                      ("hallucination questions with evidence", halluc), ("grounded questions without evidence", empty),
                      ("counting answers that are not the number of evidence regions", count)):
        if ids:
            problems.append(f"{split}: {len(ids)} {what} (first: {sorted(set(ids))[:MAX_LISTED]})")
    return problems
