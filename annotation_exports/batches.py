"""Choose a batch of items to annotate: filtered, stratified, deterministic for a seed.

An item is a question with its image and regions (the question's evidence regions when it
names any, else every region of its image); a source without questions (a proposals or
source stage) gives one item per image with regions. Strata are (source, task type or kind,
hop count); each stratum gets a share of the batch proportional to its size (largest
remainder), and inside a stratum items are taken in the order of sha256(seed, item id).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet

from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.annotation_exports.tables import SourceTables, column

BATCH_FILE = "batch.json"


class BatchFilters(BaseModel):
    """Which items may enter a batch (None: no filter on that field)."""

    model_config = ConfigDict(extra="forbid")

    sources: list[str] | None = Field(default=None, description="Image sources, e.g. sa1b, vg.")
    domains: list[str] | None = Field(default=None, description="Question domains or image visual domains.")
    task_types: list[str] | None = Field(default=None, description="Question task types (grounded questions).")
    kinds: list[str] | None = Field(default=None, description="Question kinds: template, verified, grounded, grounded_vlm.")
    hops: list[int] | None = Field(default=None, description="Hop counts of the questions.")
    hallucination: bool | None = Field(default=None, description="Only items with (true) or without (false) the flag.")
    undecided: bool = Field(default=True, description="Skip items that already have a decision in the store.")
    # left out of dumps when unset, so batch ids (a hash of the filters) read as before it existed
    absence_basis: list[str] | None = Field(default=None, exclude_if=lambda value: value is None,
                                            description="Only hallucination questions whose absence_basis is one of "
                                            "these; \"none\" for those without a basis (set aside until reviewed).")


@dataclass
class Item:
    """One unit of review: a question (or an image) with the regions shown with it."""

    item_id: str
    image_id: str
    region_ids: list[str]
    question_id: str | None = None
    question: str | None = None
    answer: str | None = None
    choices: list[str] = field(default_factory=list)
    stratum: str = ""
    answer_type: str | None = None  # "count": a non-negative integer (grounded counting); None: text


@dataclass
class Batch:
    """A chosen batch: items plus the images and regions they refer to, and how it was chosen."""

    batch_id: str
    seed: int
    filters: dict
    source: dict
    items: list[Item]
    images: dict[str, dict]  # image_id -> {width, height, file_name, url}
    regions: dict[str, dict]  # region_id -> {image_id, label, box [x, y, w, h], mask COCO RLE or None}
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> items left out

    def labels(self) -> list[str]:
        """Distinct region labels (unlabelled regions are ``region``)."""
        return sorted({r["label"] or "region" for r in self.regions.values()} | {"region"})

    def to_json(self) -> dict:
        return {"batch_id": self.batch_id, "seed": self.seed, "filters": self.filters, "source": self.source,
                "items": [dict(vars(i)) for i in self.items], "images": self.images, "regions": self.regions,
                "skipped": self.skipped}

    @classmethod
    def from_json(cls, data: dict) -> "Batch":
        return cls(batch_id=data["batch_id"], seed=data["seed"], filters=data["filters"], source=data["source"],
                   items=[Item(**i) for i in data["items"]], images=data["images"], regions=data["regions"],
                   skipped=data.get("skipped", {}))

    def write(self, folder: Path) -> Path:
        """Write ``batch.json`` (sorted keys: the same batch gives the same bytes)."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / BATCH_FILE
        path.write_text(json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
        return path


def safe_relative_path(path: str) -> bool:
    """True for a relative POSIX path that stays inside its folder (no ``..``, no absolute or drive path)."""
    if not path or "\\" in path or path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return False
    normal = posixpath.normpath(path)
    return normal != ".." and not normal.startswith("../") and "\x00" not in path


def _rank(seed: int, item_id: str) -> str:
    return hashlib.sha256(f"{seed}\0{item_id}".encode()).hexdigest()


def _allocate(sizes: dict[str, int], total: int) -> dict[str, int]:
    """Largest-remainder shares of ``total`` proportional to ``sizes``, none above its size."""
    available = sum(sizes.values())
    if total >= available:
        return dict(sizes)
    quotas = {k: total * n / available for k, n in sizes.items()}
    shares = {k: int(q) for k, q in quotas.items()}
    left = total - sum(shares.values())
    for k in sorted(quotas, key=lambda k: (-(quotas[k] - shares[k]), k))[:left]:
        shares[k] += 1
    return shares


def _images(tables: SourceTables) -> dict[str, dict]:
    """image_id -> size, file name and URL, from the images table and else from the masks' sizes."""
    images: dict[str, dict] = {}
    if tables.images is not None:
        t = tables.images
        for image_id, width, height, path, url in zip(t["image_id"].to_pylist(), column(t, "width") or [None] * t.num_rows,
                                                      column(t, "height") or [None] * t.num_rows,
                                                      column(t, "file_path") or [None] * t.num_rows,
                                                      column(t, "url") or [None] * t.num_rows):
            images[image_id] = {"width": width, "height": height, "file_name": path, "url": url}
    if tables.regions is not None:
        for image_id, mask in zip(tables.regions["image_id"].to_pylist(), column(tables.regions, "mask") or []):
            info = images.setdefault(image_id, {"width": None, "height": None, "file_name": None, "url": None})
            if mask and info["width"] is None:
                info["height"], info["width"] = (int(v) for v in mask["size"])
    return images


def _regions(tables: SourceTables) -> tuple[dict[str, dict], dict[str, list[str]]]:
    regions: dict[str, dict] = {}
    by_image: dict[str, list[str]] = defaultdict(list)
    if tables.regions is None:
        return regions, by_image
    t = tables.regions
    n = t.num_rows
    labels = column(t, "label") or [None] * n
    masks = column(t, "mask") or [None] * n
    for region_id, image_id, label, x, y, w, h, mask in zip(
            t["region_id"].to_pylist(), t["image_id"].to_pylist(), labels, t["x"].to_pylist(), t["y"].to_pylist(),
            t["w"].to_pylist(), t["h"].to_pylist(), masks):
        box = None if x is None else [float(x), float(y), float(w), float(h)]
        regions[region_id] = {"image_id": image_id, "label": label, "box": box,
                              "mask": {"size": list(mask["size"]), "counts": mask["counts"]} if mask else None}
        by_image[image_id].append(region_id)
    return regions, by_image


def _candidates(tables: SourceTables, by_image: dict[str, list[str]], regions: dict[str, dict]) -> list[dict]:
    """Every item the source offers, with the fields the filters look at."""
    q = tables.questions
    if q is None or q.num_rows == 0:
        return [{"item_id": image_id, "image_id": image_id, "region_ids": sorted(ids), "source": image_id.split(":", 1)[0],
                 "domains": [], "task_type": None, "kind": None, "n_hop": None, "hallucination": None}
                for image_id, ids in sorted(by_image.items())]
    n = q.num_rows
    nulls = [None] * n
    evidence = column(q, "evidence_region_ids") or nulls
    out = []
    for row in zip(q["question_id"].to_pylist(), q["image_id"].to_pylist(), column(q, "image_source") or nulls,
                   column(q, "question") or nulls, column(q, "answer") or nulls, column(q, "choices") or nulls,
                   column(q, "domains") or nulls, column(q, "task_type") or nulls, column(q, "kind") or nulls,
                   column(q, "n_hop") or nulls, column(q, "hallucination", "is_hallucination", "hallucination_flag") or nulls,
                   evidence, column(q, "absence_basis") or nulls):
        qid, image_id, source, question, answer, choices, domains, task_type, kind, hop, halluc, ev, basis = row
        region_ids = sorted(r for r in ev if r in regions) if ev else sorted(by_image.get(image_id, []))
        out.append({"item_id": qid, "image_id": image_id, "region_ids": region_ids, "question_id": qid,
                    "question": question, "answer": answer, "choices": list(choices or []),
                    "source": source or image_id.split(":", 1)[0], "domains": list(domains or []),
                    "task_type": task_type, "kind": kind, "n_hop": hop, "hallucination": halluc, "absence_basis": basis})
    return out


def _passes(c: dict, f: BatchFilters, image_domains: dict[str, str | None], decided: AbstractSet[str]) -> bool:
    if f.sources is not None and c["source"] not in f.sources:
        return False
    if f.domains is not None and not (set(f.domains) & (set(c["domains"]) | {image_domains.get(c["image_id"])})):
        return False
    if f.task_types is not None and c["task_type"] not in f.task_types:
        return False
    if f.kinds is not None and (c["kind"] or "template") not in f.kinds:
        return False
    if f.hops is not None and c["n_hop"] not in f.hops:
        return False
    if f.hallucination is not None and bool(c["hallucination"]) != f.hallucination:
        return False
    if f.absence_basis is not None and not (c["hallucination"] and (c.get("absence_basis") or "none") in f.absence_basis):
        return False
    return not (f.undecided and c["item_id"] in decided)


def _answer_type(c: dict) -> str | None:
    """What a corrected answer must be: "count" for a grounded counting question that is no hallucination."""
    grounded = c.get("kind") in ("grounded", "grounded_vlm")
    return "count" if grounded and c.get("task_type") == "counting" and not c.get("hallucination") else None


def select_batch(tables: SourceTables, size: int, *, seed: int = 0, filters: BatchFilters | None = None,
                 decided: AbstractSet[str] = frozenset(), batch_id: str | None = None) -> Batch:
    """Choose up to ``size`` items of ``tables`` passing ``filters``, stratified and seeded.

    Items whose image has no known size or whose file name leaves the images folder are left
    out and counted in ``Batch.skipped`` under that reason. The default batch id is a hash of
    the chosen item ids, seed and filters.
    """
    filters = filters or BatchFilters()
    images = _images(tables)
    regions, by_image = _regions(tables)
    image_domains = {}
    if tables.images is not None and "visual_domain" in tables.images.column_names:
        image_domains = dict(zip(tables.images["image_id"].to_pylist(), tables.images["visual_domain"].to_pylist()))
    skipped: dict[str, int] = defaultdict(int)
    strata: dict[str, list[dict]] = defaultdict(list)
    for c in _candidates(tables, by_image, regions):
        if not _passes(c, filters, image_domains, decided):
            skipped["filtered_or_decided"] += 1
            continue
        info = images.get(c["image_id"])
        if not info or not info["width"] or not info["height"]:
            skipped["image_size_unknown"] += 1
            continue
        if info["file_name"] is not None and not safe_relative_path(info["file_name"]):
            skipped["file_name_leaves_images_folder"] += 1
            continue
        c["stratum"] = f"{c['source']}|{c['task_type'] or c['kind'] or 'template'}|{c['n_hop']}"
        strata[c["stratum"]].append(c)
    shares = _allocate({k: len(v) for k, v in strata.items()}, size)
    chosen = []
    for key in sorted(strata):
        ranked = sorted(strata[key], key=lambda c: _rank(seed, c["item_id"]))
        chosen += ranked[:shares[key]]
        skipped["over_batch_size"] += len(ranked) - shares[key]
    chosen.sort(key=lambda c: c["item_id"])
    items = [Item(item_id=c["item_id"], image_id=c["image_id"], region_ids=c["region_ids"],
                  question_id=c.get("question_id"), question=c.get("question"), answer=c.get("answer"),
                  choices=c.get("choices", []), stratum=c["stratum"], answer_type=_answer_type(c)) for c in chosen]
    used_images = {i.image_id for i in items}
    used_regions = {r for i in items for r in i.region_ids}
    filter_json = filters.model_dump(mode="json")
    if batch_id is None:
        key = json.dumps([[i.item_id for i in items], seed, filter_json], sort_keys=True)
        batch_id = "b-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    return Batch(batch_id=batch_id, seed=seed, filters=filter_json, source={"kind": tables.kind, **tables.identity},
                 items=items, images={k: images[k] for k in sorted(used_images)},
                 regions={k: regions[k] for k in sorted(used_regions)},
                 skipped={k: v for k, v in sorted(skipped.items()) if v})
