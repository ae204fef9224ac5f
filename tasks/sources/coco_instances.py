"""The COCO categories annotated on Visual Genome images that are COCO images.

About half of Visual Genome's images carry a ``coco_id`` (``image_data.json``; null for the others):
they are MS-COCO images, whose 80 categories COCO annotates exhaustively. A VG source config naming
COCO instances files (``coco_instances``: ``instances_train2014.json``, ``instances_val2014.json`` or
the 2017 files, format ``{"images": [{"id", ...}], "annotations": [{"image_id", "category_id",
"iscrowd", ...}], "categories": [...]}``) gives each such image the set of category ids annotated on
it (a crowd annotation counts: the category is there). The questions stage turns that set into the
classes it may claim absent (tasks/questions/coco_taxonomy.py).

The instances files are hundreds of MB: each is streamed twice with ijson (its ``images`` ids, then
its ``annotations``), and only the category ids of the coco_ids of the build's VG images are kept.
An image whose coco_id is in no given file has no row (it keeps the other absence bases).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import ijson
import pyarrow as pa

from reasonvqa.jsonstream import StreamFailure, iter_json_array
from reasonvqa.stage import write_parquet
from reasonvqa.work_files import present

IMAGE_DATA = "image_data.json"
COCO_TAXONOMY = pa.schema([("image_id", pa.string()), ("coco_id", pa.int64()), ("category_ids", pa.list_(pa.int32()))])


def vg_coco_ids(image_data: Path, max_images: int | None = None) -> dict[int, list[str]]:
    """coco_id -> the stable VG image ids (``vg:<image_id>``) of the image_data rows that carry it (the first
    ``max_images`` rows only, as the reader takes them); unreadable rows are the reader's rejects, skipped here."""
    out: dict[int, list[str]] = {}
    for n, item in enumerate(iter_json_array(image_data)):
        if isinstance(item, StreamFailure) or (max_images is not None and n >= max_images):
            break
        row = item[1]
        if isinstance(row, dict) and isinstance(row.get("coco_id"), int) and isinstance(row.get("image_id"), int):
            out.setdefault(row["coco_id"], []).append(f"vg:{row['image_id']}")
    return out


def coco_categories(instances: Iterable[Path], wanted: set[int]) -> dict[int, set[int]]:
    """coco image id -> the category ids annotated on it, for the ``wanted`` ids listed in the files' ``images``
    (an image listed with no annotation: the empty set, every category absent)."""
    found: dict[int, set[int]] = {}
    for path in instances:
        try:
            with open(path, "rb") as f:
                for image_id in ijson.items(f, "images.item.id"):
                    if image_id in wanted:
                        found.setdefault(int(image_id), set())
            with open(path, "rb") as f:
                for ann in ijson.items(f, "annotations.item"):
                    image_id = ann.get("image_id") if isinstance(ann, dict) else None
                    if image_id in found and ann.get("category_id") is not None:
                        found[image_id].add(int(ann["category_id"]))
        except (ijson.JSONError, ValueError, TypeError) as exc:
            raise ValueError(f"{path}: not a readable COCO instances file ({type(exc).__name__}: {exc})") from exc
    return found


def coco_taxonomy_table(image_data: Path, instances: list[Path], max_images: int | None = None) -> pa.Table:
    """(VG image_id, coco_id, category ids) of the VG images whose coco_id is in ``instances``, by image_id."""
    ids = vg_coco_ids(image_data, max_images)
    found = coco_categories(instances, set(ids))
    rows = sorted((vg, c, sorted(cats)) for c, cats in found.items() for vg in ids[c])
    return pa.table({"image_id": [r[0] for r in rows], "coco_id": [r[1] for r in rows],
                     "category_ids": [r[2] for r in rows]}, schema=COCO_TAXONOMY)


def write_coco_taxonomy(configs: list, path: Path) -> Path | None:
    """The COCO categories of every VG source config naming ``coco_instances``, one Parquet file (kept from an earlier
    run of the same build: the work folder's key follows the config and the files); None when none names any."""
    if not any(getattr(c, "coco_instances", None) for c in configs):
        return None
    if present(path):
        return path
    tables = [coco_taxonomy_table(Path(c.path) / IMAGE_DATA, list(c.coco_instances), c.max_images)
              for c in configs if getattr(c, "coco_instances", None)]
    write_parquet(pa.concat_tables(tables).sort_by([("image_id", "ascending")]), path)
    return path
