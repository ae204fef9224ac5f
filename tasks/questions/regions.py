"""The regions of one shard of images, as grounded questions read them and the release stores them.

A shard's regions are the source's own (SA-1B masks, nuScenes projected boxes), the proposals
stage's, and one box-only region per annotated object that has none (Visual Genome): region id
``<image_id>/g<object native id>``, origin the object's, the object's attributes, and as label the
lemma of the object's WordNet synset ("trees"/tree.n.01 -> "tree", "colour"/color.n.01 -> "color"),
the annotator's name only where the object has no synset. ``classify_regions`` marks which
regions may be named by a question (object_classes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import schemas
from reasonvqa.tasks.questions.object_classes import class_verdict, synset_lemma

READ_COLUMNS = ("region_id", "image_id", "label", "x", "y", "w", "h", "area", "origin", "attributes", "center_3d")


def object_region_id(object_id: str) -> str:
    """``vg:1/o5049`` -> ``vg:1/g5049`` (the region of an annotated object)."""
    image_id, _, native = object_id.rpartition("/o")
    return f"{image_id}/g{native}"


def object_regions(objects: pa.Table | None, attributes: pa.Table | None, existing: set[str]) -> pa.Table:
    """Box-only regions for the objects with a box whose region id is not in ``existing``."""
    if objects is None or objects.num_rows == 0:
        return schemas.empty(schemas.REGIONS)
    attrs: dict[str, list[str]] = {}
    if attributes is not None:
        for oid, attr in zip(attributes["object_id"].to_pylist(), attributes["attribute"].to_pylist()):
            if attr and attr.strip():
                attrs.setdefault(oid, []).append(attr.strip().lower())
    rows = []
    columns = ["object_id", "image_id", "label", "x", "y", "w", "h", "origin"]
    for o in objects.select(columns + (["synset"] if "synset" in objects.column_names else [])).to_pylist():
        rid = object_region_id(o["object_id"])
        if rid in existing or None in (o["x"], o["y"], o["w"], o["h"]) or o["w"] <= 0 or o["h"] <= 0:
            continue
        label = synset_lemma(o.pop("synset", None)) or (o["label"] or "").strip().lower() or None
        rows.append({**o, "region_id": rid, "area": o["w"] * o["h"], "label": label,
                     "attributes": sorted(set(attrs.get(o["object_id"], []))) or None})
        del rows[-1]["object_id"]
    return schemas.from_rows(rows, schemas.REGIONS)


def shard_regions(objects: pa.Table | None, attributes: pa.Table | None, *regions: pa.Table | None) -> pa.Table:
    """Every region of a shard (given tables first, then object boxes), sorted by region_id, ids unique."""
    given = [schemas.conform(t, schemas.REGIONS) for t in regions if t is not None and t.num_rows]
    table = pa.concat_tables(given) if given else schemas.empty(schemas.REGIONS)
    if table.num_rows:  # one row per id: the first given wins (source before proposals)
        table = table.take(pa.array(sorted({rid: i for i, rid in reversed(list(enumerate(table["region_id"].to_pylist())))}.values())))
    derived = object_regions(objects, attributes, set(table["region_id"].to_pylist()))
    table = pa.concat_tables([table, derived]) if derived.num_rows else table
    return table.sort_by([("region_id", "ascending")])


@dataclass
class Region:
    """The fields of a region that question rules read."""

    region_id: str
    image_id: str
    label: str | None
    x: float
    y: float
    w: float
    h: float
    area: float
    origin: str | None
    attributes: list[str] = field(default_factory=list)
    center_3d: list[float] | None = None
    synset: str | None = None  # WordNet synset of an annotated object (Visual Genome), set by classify_regions
    subject: bool = True  # False: the label is no object class (classify_regions), so no question names it

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def depth(self) -> float | None:
        """Distance along the camera's optical axis (z of the camera-frame center), where known."""
        return self.center_3d[2] if self.center_3d and len(self.center_3d) == 3 else None


def regions_by_image(table: pa.Table) -> dict[str, list[Region]]:
    """Regions grouped by image, each image's in region_id order."""
    out: dict[str, list[Region]] = {}
    cols = [c for c in READ_COLUMNS if c in table.column_names]
    for row in table.select(cols).sort_by([("region_id", "ascending")]).to_pylist():
        label = (row["label"] or "").strip().lower() or None
        out.setdefault(row["image_id"], []).append(Region(
            region_id=row["region_id"], image_id=row["image_id"], label=label, x=row["x"], y=row["y"], w=row["w"],
            h=row["h"], area=row["area"] if row["area"] is not None else row["w"] * row["h"], origin=row["origin"],
            attributes=[a for a in (row.get("attributes") or []) if a], center_3d=row.get("center_3d")))
    return out


def classify_regions(by_image: dict[str, list[Region]], objects: pa.Table | None,
                     own_classes: frozenset[str] = frozenset()) -> list[tuple[Region, str]]:
    """Mark the labeled regions whose label is no object class (``subject`` False) and return them with the
    reason. A box-only region of an annotated object is judged by the object's synset; a source region
    (proposals) and an object of an image in ``own_classes`` (its source names classes of its own: nuScenes)
    by that taxonomy, so it is a class."""
    synsets: dict[str, str | None] = {}
    if objects is not None and objects.num_rows and "synset" in objects.column_names:
        synsets = {object_region_id(o): s for o, s in zip(objects["object_id"].to_pylist(), objects["synset"].to_pylist())}
    refused = []
    for regions in by_image.values():
        for r in regions:
            if not r.label:
                continue
            annotated = r.region_id in synsets and r.image_id not in own_classes
            r.synset = synsets.get(r.region_id)
            _, reason = class_verdict(r.synset, has_taxonomy=not annotated)
            if reason is not None:
                r.subject = False
                refused.append((r, reason))
    return refused


def box_iou(a: Region, b: Region) -> float:
    """Intersection over union of two boxes."""
    ix = max(0.0, min(a.right, b.right) - max(a.x, b.x))
    iy = max(0.0, min(a.bottom, b.bottom) - max(a.y, b.y))
    inter = ix * iy
    union = a.w * a.h + b.w * b.h - inter
    return inter / union if union > 0 else 0.0


def iou_matrix(regions: list[Region]) -> np.ndarray:
    """``box_iou`` of every pair of ``regions`` (row i, column j) in one numpy pass: the same float64 steps in the same
    order, so each value equals ``box_iou``'s (the per-pair function where a coordinate is not finite)."""
    box = np.array([(r.x, r.y, r.w, r.h) for r in regions], dtype=np.float64).reshape(-1, 4)
    if not np.isfinite(box).all():  # Python's min/max treat NaN unlike numpy's
        return np.array([[box_iou(a, b) for b in regions] for a in regions], dtype=np.float64).reshape(len(regions), -1)
    x, y, w, h = box.T
    right, bottom = x + w, y + h
    ix = np.maximum(0.0, np.minimum(right[:, None], right[None, :]) - np.maximum(x[:, None], x[None, :]))
    iy = np.maximum(0.0, np.minimum(bottom[:, None], bottom[None, :]) - np.maximum(y[:, None], y[None, :]))
    inter = ix * iy
    area = w * h
    union = area[:, None] + area[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def side_masks(regions: list[Region], gap_x: float, gap_y: float) -> dict[str, np.ndarray]:
    """side -> [i, j] True where ``grounded.spatial_answer(regions[i], regions[j], axis)`` names that side ("left",
    "right" along x with margin ``gap_x``; "above", "below" along y with ``gap_y``), for every pair at once."""
    x, y, w, h = np.array([(r.x, r.y, r.w, r.h) for r in regions], dtype=np.float64).reshape(-1, 4).T
    right, bottom = x + w, y + h
    left = right[:, None] + gap_x <= x[None, :]
    above = bottom[:, None] + gap_y <= y[None, :]
    return {"left": left, "right": ~left & (right[None, :] + gap_x <= x[:, None]),
            "above": above, "below": ~above & (bottom[None, :] + gap_y <= y[:, None])}


def image_labels(objects: pa.Table | None, regions: pa.Table | None) -> pa.Table:
    """(image_id, label) pairs of every object name and region label, lower-cased, distinct."""
    parts = []
    if objects is not None and objects.num_rows:
        names = objects.select(["image_id", "names"]).to_pylist()
        pairs = [(r["image_id"], n) for r in names for n in (r["names"] or [])]
        pairs += list(zip(objects["image_id"].to_pylist(), objects["label"].to_pylist()))
        parts.append(pairs)
    if regions is not None and regions.num_rows:
        parts.append(list(zip(regions["image_id"].to_pylist(), regions["label"].to_pylist())))
    seen = sorted({(i, n.strip().lower()) for part in parts for i, n in part if i and n and n.strip()})
    return pa.table({"image_id": pa.array([i for i, _ in seen], pa.string()), "label": pa.array([n for _, n in seen], pa.string())})


def unlabeled_images(regions: pa.Table | None) -> set[str]:
    """Images with at least one region without a class label (absence cannot be checked there)."""
    if regions is None or regions.num_rows == 0:
        return set()
    return set(pc.unique(regions.filter(pc.is_null(regions["label"]))["image_id"]).to_pylist())
