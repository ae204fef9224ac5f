"""CVAT for images 1.1 XML: export a batch (boxes, masks, question tags with our ids); import decisions.

Regions carry the attributes ``region_id`` (ours) and ``decision`` (undecided / accept /
reject); each question is a ``<tag label="question">`` with ``question_id``, ``question``,
``verdict`` (unchecked / correct / wrong) and ``answer``. On import, a region of the batch
that is missing from an image present in the file was deleted by the annotator: a reject.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from reasonvqa import masks
from reasonvqa.annotation_exports.batches import Batch, Item, safe_relative_path
from reasonvqa.annotation_exports.decisions import DecisionStore, ImportReport, StoreError, normalize_time
from reasonvqa.annotation_exports.importing import BadRecord, added_region_id, changed_geometry, decision, match_region

ANNOTATIONS_FILE = "annotations.xml"
QUESTION_LABEL = "question"
REGION_DECISIONS = ("undecided", "accept", "reject")
VERDICTS = ("unchecked", "correct", "wrong")


def image_name(info: dict, image_id: str) -> str:
    """The image's name in the task: its file name under the images folder, else a name made from its id."""
    return info.get("file_name") or image_id.replace(":", "_").replace("/", "_") + ".jpg"


def _attribute_spec(parent: ET.Element, name: str, input_type: str, values: tuple[str, ...] = ()) -> None:
    a = ET.SubElement(parent, "attribute")
    ET.SubElement(a, "name").text = name
    ET.SubElement(a, "mutable").text = "False"
    ET.SubElement(a, "input_type").text = input_type
    ET.SubElement(a, "default_value").text = values[0] if values else ""
    ET.SubElement(a, "values").text = "\n".join(values)


def _attributes(shape: ET.Element, values: dict[str, str]) -> None:
    for name, value in values.items():
        ET.SubElement(shape, "attribute", name=name).text = value


def export_cvat(batch: Batch, out: Path) -> list[Path]:
    """Write ``annotations.xml`` (CVAT for images 1.1) for ``batch`` into ``out``."""
    root = ET.Element("annotations")
    ET.SubElement(root, "version").text = "1.1"
    task = ET.SubElement(ET.SubElement(root, "meta"), "task")
    ET.SubElement(task, "name").text = batch.batch_id
    ET.SubElement(task, "size").text = str(len(batch.images))
    ET.SubElement(task, "mode").text = "annotation"
    labels = ET.SubElement(task, "labels")
    for name in batch.labels():
        label = ET.SubElement(labels, "label")
        ET.SubElement(label, "name").text = name
        ET.SubElement(label, "type").text = "any"
        specs = ET.SubElement(label, "attributes")
        _attribute_spec(specs, "region_id", "text")
        _attribute_spec(specs, "decision", "select", REGION_DECISIONS)
    label = ET.SubElement(labels, "label")
    ET.SubElement(label, "name").text = QUESTION_LABEL
    ET.SubElement(label, "type").text = "tag"
    specs = ET.SubElement(label, "attributes")
    for name in ("question_id", "question", "answer"):
        _attribute_spec(specs, name, "text")
    _attribute_spec(specs, "verdict", "select", VERDICTS)
    items_by_image: dict[str, list[Item]] = {}
    for item in batch.items:
        items_by_image.setdefault(item.image_id, []).append(item)
    for index, image_id in enumerate(sorted(items_by_image)):
        info = batch.images[image_id]
        width, height = int(info["width"]), int(info["height"])
        image = ET.SubElement(root, "image", id=str(index), name=image_name(info, image_id), width=str(width), height=str(height))
        region_ids = sorted({r for item in items_by_image[image_id] for r in item.region_ids})
        for region_id in region_ids:
            _region_shape(image, region_id, batch.regions[region_id])
        for item in items_by_image[image_id]:
            if item.question_id is not None:
                tag = ET.SubElement(image, "tag", label=QUESTION_LABEL, source="auto")
                _attributes(tag, {"question_id": item.question_id, "question": item.question or "",
                                  "answer": item.answer or "", "verdict": "unchecked"})
    ET.indent(root, space="  ")
    out.mkdir(parents=True, exist_ok=True)
    path = out / ANNOTATIONS_FILE
    path.write_bytes(b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="utf-8") + b"\n")
    return [path]


def _region_shape(image: ET.Element, region_id: str, region: dict) -> None:
    label = region["label"] or "region"
    common: dict[str, str] = {"label": label, "source": "auto", "occluded": "0", "z_order": "0"}
    encoded = masks.cvat_encode_coco(region["mask"]) if region["mask"] is not None else None
    if encoded is not None:
        shape = ET.SubElement(image, "mask", common, rle=encoded.rle, left=str(encoded.left), top=str(encoded.top),
                              width=str(encoded.width), height=str(encoded.height))
    else:
        x, y, w, h = region["box"]
        shape = ET.SubElement(image, "box", common, xtl=f"{x:.2f}", ytl=f"{y:.2f}", xbr=f"{x + w:.2f}", ybr=f"{y + h:.2f}")
    _attributes(shape, {"region_id": region_id, "decision": "undecided"})


# --- import ------------------------------------------------------------------------------------


def _shape_geometry(shape: ET.Element, width: int, height: int) -> tuple[np.ndarray | None, list[float] | None]:
    try:
        if shape.tag == "mask":
            left, top, w, h = (int(round(float(shape.get(k, "")))) for k in ("left", "top", "width", "height"))
            return masks.cvat_decode(shape.get("rle") or "", left, top, w, h, width, height), None
        if shape.tag == "box":
            x1, y1, x2, y2 = (float(shape.get(k, "")) for k in ("xtl", "ytl", "xbr", "ybr"))
            if float(shape.get("rotation") or 0) != 0:
                raise BadRecord("malformed_geometry", "rotated boxes are not regions of the record model")
            if x2 < x1 or y2 < y1:
                raise BadRecord("malformed_geometry", f"box corners out of order ({x1},{y1})-({x2},{y2})")
            return None, [x1, y1, x2 - x1, y2 - y1]
        points = [float(v) for pair in (shape.get("points") or "").split(";") for v in pair.split(",")]
        if len(points) < 6 or len(points) % 2:
            raise BadRecord("malformed_geometry", "a polygon needs at least three x,y points")
        return masks.polygon_mask(points, height, width), None
    except masks.MaskError as exc:
        raise BadRecord("malformed_rle", str(exc)) from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, BadRecord):
            raise
        raise BadRecord("malformed_geometry", f"{shape.tag} has unreadable coordinates") from None


def _find_batch(root: ET.Element, store: DecisionStore, batch_id: str | None) -> Batch:
    if batch_id is not None:
        batch = store.batch(batch_id)
        if batch is None:
            raise StoreError(f"batch {batch_id!r} is not in the store {store.root}")
        return batch
    named = store.batch((root.findtext("meta/task/name") or root.findtext("meta/project/name") or "").strip())
    if named is not None:
        return named
    names = {image.get("name") for image in root.iter("image")}
    candidates = []
    for path in sorted((store.root / "batches").glob("*.json")):
        batch = store.batch(path.stem)
        if batch and names <= {image_name(info, k) for k, info in batch.images.items()}:
            candidates.append(batch)
    if len(candidates) != 1:
        raise StoreError(f"cannot tell which batch this CVAT file belongs to ({len(candidates)} batches hold its "
                         "images); pass the batch id")
    return candidates[0]


def parse_cvat(data: bytes, name: str, store: DecisionStore, report: ImportReport, *, batch_id: str | None = None,
               annotator: str | None = None, time: str | None = None) -> None:
    """Fill ``report`` from a CVAT for images 1.1 XML file of one of the store's batches."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise StoreError(f"{name}: not XML ({exc})") from None
    if root.tag != "annotations" or (root.findtext("version") or "").strip() != "1.1":
        raise StoreError(f"{name}: not a CVAT for images 1.1 file (root <{root.tag}>, version {root.findtext('version')!r})")
    batch = _find_batch(root, store, batch_id)
    who = annotator or f"cvat:{(root.findtext('meta/task/owner/username') or root.findtext('meta/project/owner/username') or 'unknown').strip()}"
    try:
        when = normalize_time(time or root.findtext("meta/dumped"))
    except (TypeError, ValueError):
        raise StoreError(f"{name}: no readable <meta><dumped> time; give the annotation time explicitly") from None
    by_name = {image_name(info, image_id): image_id for image_id, info in batch.images.items()}
    items_by_image: dict[str, list[Item]] = {}
    for item in batch.items:
        items_by_image.setdefault(item.image_id, []).append(item)
    for i, image in enumerate(root.findall("image")):
        where = f"{name}#image[{i}]"
        file_name = image.get("name") or ""
        if not safe_relative_path(file_name):
            report.rejects.append({"reason": "file_name_leaves_images_folder", "source": where, "detail": file_name})
            continue
        image_id = by_name.get(file_name)
        if image_id is None:
            report.rejects.append({"reason": "unknown_image", "source": where, "detail": file_name})
            continue
        info = batch.images[image_id]
        width, height = int(info["width"]), int(info["height"])
        if (image.get("width"), image.get("height")) != (str(width), str(height)):
            report.rejects.append({"reason": "size_mismatch", "source": where,
                                   "detail": f"image is {image.get('width')}x{image.get('height')} in the file, {width}x{height} in the batch"})
            continue
        context = _ImageContext(batch, items_by_image[image_id], width, height, who, when, where, report)
        context.read(image)


class _ImageContext:
    """Decisions of one ``<image>`` element."""

    def __init__(self, batch: Batch, items: list[Item], width: int, height: int, who: str, when: str, where: str,
                 report: ImportReport):
        self.batch, self.items, self.width, self.height = batch, items, width, height
        self.common: dict[str, Any] = {"annotator": who, "time": when}
        self.where, self.report, self.who = where, report, who
        self.region_item = {r: item for item in reversed(items) for r in item.region_ids}
        self.image_item = Item(item_id=items[0].item_id, image_id=items[0].image_id,
                               region_ids=sorted(self.region_item))  # IoU matching over every region of the image

    def reject(self, reason: str, source: str, detail: str) -> None:
        self.report.rejects.append({"reason": reason, "source": source, "detail": detail})

    def read(self, image: ET.Element) -> None:
        seen: set[str] = set()
        for k, shape in enumerate(image):
            source = f"{self.where}.{shape.tag}[{k}]"
            attrs = {a.get("name", ""): (a.text or "") for a in shape.findall("attribute")}
            if shape.tag == "tag":
                if shape.get("label") == QUESTION_LABEL:
                    self._question(attrs, source)
                continue
            if shape.tag not in ("box", "mask", "polygon"):
                self.reject("unsupported_shape", source, f"<{shape.tag}> is not a region shape")
                continue
            try:
                region_id = self._region(shape, attrs, source)
            except BadRecord as exc:
                self.reject(exc.reason, source, str(exc))
                region_id = attrs.get("region_id")  # a broken shape of a known region is not a deletion
            if region_id:
                seen.add(region_id)
        for region_id in sorted(set(self.region_item) - seen):
            self.report.decisions.append(decision(self.batch, self.region_item[region_id], target="region", action="reject",
                                                  region_id=region_id, source=f"{self.where} (deleted)", **self.common))

    def _region(self, shape: ET.Element, attrs: dict[str, str], source: str) -> str | None:
        region_id = attrs.get("region_id", "").strip() or None
        verdict = attrs.get("decision", "undecided").strip() or "undecided"
        if verdict not in REGION_DECISIONS:
            raise BadRecord("unknown_choice", f"decision {verdict!r}")
        if region_id is not None and region_id not in self.region_item:
            raise BadRecord("unknown_region_id", f"region {region_id!r} is not in this image of the batch")
        mask, box = _shape_geometry(shape, self.width, self.height)
        rle = masks.coco_encode(mask) if mask is not None else None
        if region_id is None:
            region_id = match_region(self.batch, self.image_item, mask, box, rle)
        common: dict[str, Any] = {**self.common, "source": source}
        if region_id is None:
            if verdict == "reject":
                return None
            if rle:
                geometry = rle["counts"]
            else:
                assert box is not None, "a shape without a mask has a box (_shape_geometry)"
                geometry = json.dumps([round(v, 4) for v in box])
            self.report.decisions.append(decision(
                self.batch, self.items[0], target="region", action="add", label=shape.get("label") or "region",
                region_id=added_region_id(self.items[0].image_id, self.who, geometry),
                box=masks.coco_area_and_box(rle)[1] if rle else box, mask=rle, **common))
            return None
        item = self.region_item[region_id]
        if verdict == "reject":
            self.report.decisions.append(decision(self.batch, item, target="region", action="reject", region_id=region_id, **common))
            return region_id
        region = self.batch.regions[region_id]
        changed = changed_geometry(region, mask, box, rle)
        if changed is not None:
            self.report.decisions.append(decision(self.batch, item, target="region", action="edit", region_id=region_id,
                                                  label=shape.get("label"), box=changed[1], mask=changed[0], **common))
        elif verdict == "accept":
            self.report.decisions.append(decision(self.batch, item, target="region", action="accept", region_id=region_id, **common))
        return region_id

    def _question(self, attrs: dict[str, str], source: str) -> None:
        item = next((i for i in self.items if i.question_id == attrs.get("question_id")), None)
        if item is None:
            self.reject("unknown_item", source, f"question {attrs.get('question_id')!r} is not in this image of the batch")
            return
        verdict = attrs.get("verdict", "unchecked").strip() or "unchecked"
        answer = attrs.get("answer", "").strip()
        common: dict[str, Any] = {**self.common, "source": source}
        if verdict not in VERDICTS:
            self.reject("unknown_choice", source, f"verdict {verdict!r}")
        elif answer != (item.answer or "").strip():
            if not answer:
                self.reject("empty_answer", source, "the corrected answer is empty")
            else:
                try:
                    self.report.decisions.append(decision(self.batch, item, target="question", action="edit_answer",
                                                          answer=answer, **common))
                except BadRecord as exc:
                    self.reject(exc.reason, source, str(exc))
        elif verdict != "unchecked":
            self.report.decisions.append(decision(self.batch, item, target="question", action=verdict, **common))
