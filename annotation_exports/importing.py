"""What every importer shares: decision records, in-file duplicates and conflicts, the commit."""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Callable

import numpy as np

from reasonvqa import masks
from reasonvqa.annotation_exports.batches import Batch, Item
from reasonvqa.annotation_exports.decisions import DecisionStore, ImportReport, StoreError, decision_id, target_of
from reasonvqa.gc_pause import gc_paused


class BadRecord(ValueError):
    """One record of an export that is rejected, with a machine-readable ``reason``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


MATCH_IOU = 0.9  # an unknown region id matches an exported region of the item at this IoU or more


def decision(batch: Batch, item: Item, *, target: str, action: str, annotator: str, time: str, source: str,
             region_id: str | None = None, answer: str | None = None, label: str | None = None,
             box: list[float] | None = None, mask: dict | None = None) -> dict:
    """One decision record with its content id; BadRecord when a value is of the wrong type or
    impossible for the item's image (``check_values``)."""
    check_values(batch, item, target=target, answer=answer, label=label, box=box, mask=mask, annotator=annotator,
                 time=time)
    if target == "question" and item.answer_type == "count" and answer is not None:
        answer = str(int(answer))  # "07" and "7" are one count
    record = {"batch_id": batch.batch_id, "item_id": item.item_id, "image_id": item.image_id, "target": target,
              "question_id": item.question_id if target == "question" else None, "region_id": region_id,
              "action": action, "answer": answer, "label": label,
              "box": [round(float(v), 4) for v in box] if box is not None else None, "mask": mask,
              "annotator": annotator, "time": time}
    record["decision_id"] = decision_id(record)
    record["source"] = source
    return record


BOX_TOLERANCE = 0.01  # px: exports round percentages; a box may pass the image's edge by this much


def check_values(batch: Batch, item: Item, *, target: str, answer: object, label: object, box: object, mask: object,
                 annotator: object, time: object) -> None:
    """Refuse, as a BadRecord, what the release writer or verify would refuse, whatever the format it came in.

    Boxes: four finite numbers, non-negative size, inside the item's image; masks: COCO RLE of the
    image's size; answers: text, a count (``Item.answer_type == "count"``) a non-negative integer, the
    answer to a multiple-choice question (the batch's ``Item.choices``) one of its choices; labels,
    annotator and time: text.
    """
    if not isinstance(annotator, str) or not annotator:
        raise BadRecord("bad_annotator", f"annotator {annotator!r} is not a name")
    if not isinstance(time, str) or not time:
        raise BadRecord("bad_time", f"time {time!r} is not an ISO 8601 time")
    if label is not None and not isinstance(label, str):
        raise BadRecord("malformed_geometry", f"label {label!r} is not text")
    if target == "question" and answer is not None:
        if not isinstance(answer, str):
            raise BadRecord("wrong_answer_type", f"answer {answer!r} is not text")
        if item.answer_type == "count" and not (answer.isascii() and answer.isdigit()):
            raise BadRecord("wrong_answer_type", f"answer {answer!r} to a counting question is not a non-negative integer")
        if item.choices and answer not in item.choices:  # the release keeps the choices as they are
            raise BadRecord("answer_not_a_choice",
                            f"answer {answer!r} is not one of the question's choices {item.choices}")
    info = batch.images.get(item.image_id) or {}
    width, height = info.get("width"), info.get("height")
    if box is not None:
        if not isinstance(box, (list, tuple)) or len(box) != 4 or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in box):
            raise BadRecord("malformed_geometry", f"box {box!r} is not four numbers")
        x, y, w, h = (float(v) for v in box)
        if not all(math.isfinite(v) for v in (x, y, w, h)) or not math.isfinite(x + w) or not math.isfinite(y + h):
            raise BadRecord("malformed_geometry", f"box {[x, y, w, h]} is not finite")
        if w < 0 or h < 0:
            raise BadRecord("malformed_geometry", f"box {[x, y, w, h]} has a negative size")
        if width and height and (x < -BOX_TOLERANCE or y < -BOX_TOLERANCE or x + w > width + BOX_TOLERANCE
                                 or y + h > height + BOX_TOLERANCE):
            raise BadRecord("outside_image", f"box {[x, y, w, h]} is not inside the {width}x{height} image")
    if mask is not None:
        if not isinstance(mask, dict) or not isinstance(mask.get("size"), list) or not isinstance(mask.get("counts"), str):
            raise BadRecord("malformed_rle", "mask is not COCO RLE (size and counts)")
        size = mask["size"]
        if width and height and size != [int(height), int(width)]:
            raise BadRecord("size_mismatch", f"mask of size {size} (h, w) on a {width}x{height} image")


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
        if mask is not None and rle is not None and region["mask"] is not None:  # rle is set whenever mask is
            iou = masks.rle_iou(rle, region["mask"]) if rle["size"] == list(region["mask"]["size"]) else 0.0
        else:
            theirs = box if box is not None else _mask_box(rle)
            iou = box_iou(theirs, region["box"]) if theirs and region["box"] else 0.0
        if iou >= best_iou:
            best, best_iou = region_id, iou
    return best


def box_iou(a: list[float], b: list[float]) -> float:
    """Intersection over union of two XYWH boxes."""
    ax2, ay2, bx2, by2 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw = max(0.0, min(ax2, bx2) - max(a[0], b[0]))
    ih = max(0.0, min(ay2, by2) - max(a[1], b[1]))
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


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


def run_import(store: DecisionStore, fmt: str, path: Path, parse: Callable[[bytes, str, DecisionStore, ImportReport], None],
               *, strict: bool = False) -> ImportReport:
    """Parse ``path`` with ``parse`` into a report and commit its good decisions (one commit, all or nothing).

    ``strict``: a file with any rejected record commits nothing (StoreError naming the first)."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no such file")
    data = path.read_bytes()
    report = ImportReport(import_id="sha256:" + hashlib.sha256(data).hexdigest(), format=fmt, file=path.name)
    with gc_paused():  # parsing builds millions of objects and no reference cycles
        parse(data, path.name, store, report)
    resolve_in_file(report)
    if strict and report.rejects:
        first = report.rejects[0]
        raise StoreError(f"{len(report.rejects)} record(s) rejected, first {first['source']}: {first['reason']} "
                         f"({first['detail']}); nothing imported (--strict)")
    return store.commit(report)


def reject_lines(report: ImportReport, limit: int = 20) -> list[str]:
    """``file#task-id...: reason (detail)`` per rejected record, the first ``limit`` and a count of the rest."""
    lines = [f"{r['source']}: {r['reason']} ({r['detail']})" for r in report.rejects[:limit]]
    if len(report.rejects) > limit:
        lines.append(f"... and {len(report.rejects) - limit} more rejected record(s) (in the import file)")
    return lines


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
