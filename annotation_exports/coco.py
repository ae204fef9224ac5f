"""COCO JSON export of a batch: images, categories, annotations with boxes and RLE masks.

Our ids ride along in extra keys that COCO readers ignore: ``reasonvqa_image_id`` on images,
``reasonvqa_region_id`` on annotations, and the batch's items (questions) under ``reasonvqa``.
A region without a mask gets its box as a four-point polygon, so every annotation has a
segmentation pycocotools can rasterize.
"""

from __future__ import annotations

import json
from pathlib import Path

from reasonvqa import masks
from reasonvqa.annotation_exports.batches import Batch
from reasonvqa.annotation_exports.cvat import image_name

INSTANCES_FILE = "instances.json"


def coco_document(batch: Batch) -> dict:
    """The COCO instances document of ``batch``."""
    labels = batch.labels()
    category = {name: k + 1 for k, name in enumerate(labels)}
    image_ids = sorted({item.image_id for item in batch.items})
    number = {image_id: k + 1 for k, image_id in enumerate(image_ids)}
    images = [{"id": number[i], "file_name": image_name(batch.images[i], i), "width": int(batch.images[i]["width"]),
               "height": int(batch.images[i]["height"]), "reasonvqa_image_id": i} for i in image_ids]
    annotations: list[dict] = []
    for region_id in sorted(batch.regions):
        region = batch.regions[region_id]
        if region["mask"] is not None:
            area, box = masks.coco_area_and_box(region["mask"])
            segmentation = region["mask"]
        else:
            x, y, w, h = box = region["box"]
            area = w * h
            segmentation = [[x, y, x + w, y, x + w, y + h, x, y + h]]
        annotations.append({"id": len(annotations) + 1, "image_id": number[region["image_id"]],
                            "category_id": category[region["label"] or "region"], "bbox": box, "area": area,
                            "iscrowd": 0, "segmentation": segmentation, "reasonvqa_region_id": region_id})
    return {
        "info": {"description": f"reasonvqa annotation batch {batch.batch_id}", "version": batch.batch_id},
        "licenses": [],
        "images": images,
        "categories": [{"id": category[name], "name": name, "supercategory": "region"} for name in labels],
        "annotations": annotations,
        "reasonvqa": {"batch_id": batch.batch_id,
                      "items": [{"item_id": i.item_id, "image_id": i.image_id, "question_id": i.question_id,
                                 "question": i.question, "answer": i.answer, "choices": i.choices,
                                 "region_ids": i.region_ids} for i in batch.items]},
    }


def export_coco(batch: Batch, out: Path) -> list[Path]:
    """Write ``instances.json`` for ``batch`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / INSTANCES_FILE
    with path.open("w", encoding="utf-8") as handle:
        json.dump(coco_document(batch), handle, sort_keys=True, separators=(",", ":"))
        handle.write("\n")
    return [path]
