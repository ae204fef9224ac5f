"""What every importer shares: decision records, in-file duplicates and conflicts, the commit."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Callable

import numpy as np

from reasonvqa.annotation_exports import masks
from reasonvqa.annotation_exports.batches import Batch, Item
from reasonvqa.annotation_exports.decisions import DecisionStore, ImportReport, StoreError, decision_id, target_of
from reasonvqa.tasks.sources.gc_pause import gc_paused

MATCH_IOU = 0.9  # an unknown region id matches an exported region of the item at this IoU or more


def decision(batch: Batch, item: Item, *, target: str, action: str, annotator: str, time: str, source: str,
             region_id: str | None = None, answer: str | None = None, label: str | None = None,
             box: list[float] | None = None, mask: dict | None = None) -> dict:
    """One decision record with its content id."""
    record = {"batch_id": batch.batch_id, "item_id": item.item_id, "image_id": item.image_id, "target": target,
              "question_id": item.question_id if target == "question" else None, "region_id": region_id,
              "action": action, "answer": answer, "label": label,
              "box": [round(float(v), 4) for v in box] if box is not None else None, "mask": mask,
              "annotator": annotator, "time": time}
    record["decision_id"] = decision_id(record)
    record["source"] = source
    return record


def added_region_id(image_id: str, annotator: str, geometry: str) -> str:
    """Stable id of a region an annotator drew: ``<image_id>/gh<12 hex>``."""
    digest = hashlib.sha256("\0".join((annotator, geometry)).encode()).hexdigest()
    return f"{image_id}/gh{digest[:12]}"


def match_region(batch: Batch, item: Item, mask: np.ndarray | None, box: list[float] | None,
                 rle: dict | None = None) -> str | None:
    """The exported region of ``item`` with the highest IoU >= MATCH_IOU to this geometry, if any.

    ``rle``: ``mask`` as COCO RLE when the caller has it (mask IoU is computed on the runs).
    """
    best, best_iou = None, MATCH_IOU
    if mask is not None and rle is None:
        rle = masks.coco_encode(mask)
    for region_id in item.region_ids:
        region = batch.regions[region_id]
        if mask is not None and region["mask"] is not None:
            iou = masks.rle_iou(rle, region["mask"]) if rle["size"] == list(region["mask"]["size"]) else 0.0
        else:
            theirs = box if box is not None else _mask_box(rle)
            iou = masks.box_iou(theirs, region["box"]) if theirs and region["box"] else 0.0
        if iou >= best_iou:
            best, best_iou = region_id, iou
    return best


def _mask_box(rle: dict | None) -> list[float] | None:
    if rle is None:
        return None
    area, box = masks.coco_area_and_box(rle)
    return box if area > 0 else None


def _content(d: dict) -> str:
    """What a decision says about its target, whichever item it came through."""
    return json.dumps([d["action"], d["answer"], d["label"], d["box"], d["mask"]], sort_keys=True)


def resolve_in_file(report: ImportReport) -> None:
    """Keep one of decisions that say the same about a target (the same region reviewed in two of
    its image's items, or a repeated record); reject every decision of a target that one annotator
    decided differently at the same time in this file (the rule cannot order them)."""
    groups: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for d in report.decisions:
        group = groups[(target_of(d), d["time"], d["annotator"])]
        if _content(d) in group:
            report.duplicates.append({"decision_id": d["decision_id"], "source": d["source"]})
        else:
            group[_content(d)] = d
    report.decisions = []
    for (target, when, who), group in groups.items():
        if len(group) == 1:
            report.decisions += group.values()
            continue
        for d in group.values():
            report.rejects.append({"reason": "conflicting_decisions", "source": d["source"],
                                   "detail": f"{target} decided differently by {who} at {when}"})
    report.decisions.sort(key=lambda d: (d["item_id"], target_of(d), d["time"], d["decision_id"]))


def run_import(store: DecisionStore, fmt: str, path: Path, parse: Callable[[bytes, str, DecisionStore, ImportReport], None]) -> ImportReport:
    """Parse ``path`` with ``parse`` into a report and commit its decisions (all or nothing)."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no such file")
    data = path.read_bytes()
    report = ImportReport(import_id="sha256:" + hashlib.sha256(data).hexdigest(), format=fmt, file=path.name)
    with gc_paused():  # parsing builds millions of objects and no reference cycles
        parse(data, path.name, store, report)
    resolve_in_file(report)
    return store.commit(report)


class BadRecord(ValueError):
    """One record of an export that is rejected, with a machine-readable ``reason``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def changed_geometry(region: dict, mask: np.ndarray | None, box: list[float] | None,
                     rle: dict | None = None) -> tuple[dict | None, list[float]] | None:
    """(COCO RLE or None, XYWH box) when the returned shape differs from the exported region, else None.

    Masks compare pixel for pixel (``rle``: ``mask`` as COCO RLE when the caller has it); boxes
    within 0.01 px (exports write 2 decimals or percentages). A box returned for a region that
    had a mask replaces the mask (the annotator redrew it as a box).
    """
    if mask is not None:
        rle = rle or masks.coco_encode(mask)
        area, new_box = masks.coco_area_and_box(rle)
        theirs = region["mask"]
        if theirs is not None and list(theirs["size"]) == rle["size"] and (
                theirs["counts"] == rle["counts"]  # pycocotools writes one string per mask
                or (masks.coco_area_and_box(theirs)[0] == area and np.array_equal(mask, masks.coco_decode(theirs)))):
            return None
        return rle, new_box
    if box is None:
        return None
    if region["box"] is not None and region["mask"] is None and max(abs(a - b) for a, b in zip(box, region["box"])) <= 0.01:
        return None
    return None, box
