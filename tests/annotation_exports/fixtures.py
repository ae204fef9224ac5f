"""A small release with images, regions (masks touching borders, one-pixel masks, boxes) and questions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.masks import coco_area_and_box, coco_encode
from reasonvqa.tasks.release.writer import write_release

SIZES = {"sa1b:1": (40, 30), "sa1b:2": (20, 10), "nuscenes:cam1": (50, 40), "vg:9": (64, 48)}  # width, height


def border_mask(width: int = 40, height: int = 30) -> np.ndarray:
    """Touches all four borders: the first row, the last column and a block in the bottom-left corner."""
    m = np.zeros((height, width), np.uint8)
    m[0, :] = 1
    m[:, width - 1] = 1
    m[height - 5:, :4] = 1
    return m


def one_pixel(width: int, height: int, row: int, col: int) -> np.ndarray:
    m = np.zeros((height, width), np.uint8)
    m[row, col] = 1
    return m


def blob(width: int, height: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = (rng.random((height, width)) > 0.6).astype(np.uint8)
    m[:, : width // 3] = 0
    return m


def masks_by_region() -> dict[str, np.ndarray]:
    return {
        "sa1b:1/g1": border_mask(),
        "sa1b:1/g2": one_pixel(40, 30, 0, 0),
        "sa1b:1/g3": blob(40, 30, seed=3),
        "sa1b:2/g1": one_pixel(20, 10, 9, 19),
        "sa1b:2/g2": np.ones((10, 20), np.uint8),
    }


def region_rows() -> list[dict]:
    rows = []
    for region_id, mask in masks_by_region().items():
        rle = coco_encode(mask)
        area, (x, y, w, h) = coco_area_and_box(rle)
        rows.append({"region_id": region_id, "image_id": region_id.split("/")[0], "label": None, "x": x, "y": y, "w": w,
                     "h": h, "mask": rle, "area": area, "score": 0.9, "origin": "annotation:sa1b"})
    rows.append({"region_id": "nuscenes:cam1/g1", "image_id": "nuscenes:cam1", "label": "car", "x": 2.5, "y": 3.0,
                 "w": 20.0, "h": 10.25, "area": 205.0, "origin": "annotation:nuscenes"})
    rows.append({"region_id": "nuscenes:cam1/g2", "image_id": "nuscenes:cam1", "label": "pedestrian", "x": 30.0,
                 "y": 20.0, "w": 5.0, "h": 12.0, "area": 60.0, "origin": "annotation:nuscenes"})
    return rows


def image_rows() -> list[dict]:
    return [{"image_id": i, "source": i.split(":")[0], "source_image_id": i.split(":")[1], "width": w, "height": h,
             "file_path": f"{i.split(':')[0]}/{i.split(':')[1]}.jpg", "visual_domain": "outdoor"}
            for i, (w, h) in SIZES.items()]


def question(qid: str, image: str, answer: str, choices: list[str], hop: int = 2, kind: str | None = None) -> dict:
    return {"question_id": qid, "image_id": image, "image_source": image.split(":")[0], "object_ids": [],
            "question": f"Question {qid} about {image}?", "answer": answer, "answer_category": "literal",
            "choices": choices, "n_hop": hop, "route": ["P17", "P36"], "property_id": "P36",
            "domains": ["Places & Locations"], "has_scene_graph": False, "template_ids": ["t"], "template_version": "t1",
            "knowledge_snapshot": "k1", "kind": kind}


def question_rows() -> list[dict]:
    return [
        question("q1", "sa1b:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"]),
        question("q2", "sa1b:1", "Lisbon", ["Porto", "Lisbon", "Braga", "Faro"], hop=1),
        question("q3", "sa1b:2", "Madrid", ["Madrid", "Rome", "Bern", "Oslo"]),
        question("q4", "nuscenes:cam1", "Berlin", ["Berlin", "Bonn", "Kiel", "Ulm"]),
        question("q5", "nuscenes:cam1", "Vienna", ["Graz", "Linz", "Vienna", "Wels"], hop=3, kind="verified"),
        question("q6", "vg:9", "Tokyo", ["Tokyo", "Kyoto", "Osaka", "Nara"]),
    ]


def write_fixture_release(root: Path, name: str = "ann", version: str = "1.0.0") -> Path:
    """A release written by the real writer, with regions and images tables."""
    questions = schemas.from_rows(question_rows(), schemas.QUESTIONS)
    by_image = {"train": ["sa1b:1", "nuscenes:cam1"], "test": ["sa1b:2", "vg:9"]}
    splits = {s: questions.filter(pa.compute.is_in(questions["image_id"], pa.array(images))) for s, images in by_image.items()}
    return write_release(root, name, version, splits, pool=questions, stats_dir=None,
                         config={"release": {"name": name, "version": version}, "seed": 0}, inputs={},
                         tables={"regions": schemas.from_rows(region_rows(), schemas.REGIONS),
                                 "images": schemas.from_rows(image_rows(), schemas.IMAGES)})
