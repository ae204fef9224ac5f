"""The proposals stage: images -> tags -> GroundingDINO boxes -> class-count NMS -> filters -> SAM masks.

One shard = one source shard of images. Record unit (``rows_in``): every candidate box the
detector returned above its thresholds, plus every image that could not be read. Each
candidate ends as one REGIONS row or one reject (``nms_suppressed``, ``box_too_large``,
``class_too_few_instances``); an unreadable image is one reject (``image_unreadable``).
Models are loaded once per worker (``setup``); each batch of images is one cached call, so a
rerun of a killed shard repeats no finished batch. Images are read, decoded and resized for the
detector by loader threads a batch ahead (``loader.py``), so the device does not wait for them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.stage_contract import Resources, ShardContext, Stage
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.proposals.config import ProposalsConfig
from reasonvqa.tasks.proposals.filters import filter_reasons
from reasonvqa.tasks.proposals.loader import ImageItem, LoadedImage, prefetched_batches
from reasonvqa.tasks.proposals.nms import class_count_nms
from reasonvqa.tasks.proposals.prompts import split_passes
from reasonvqa.tasks.proposals.tagging import TagRequest, apply_stop_list, load_stop_list

NMS_SUPPRESSED = "nms_suppressed"
IMAGE_UNREADABLE = "image_unreadable"
# the prompted classes of an image that no box reached the box threshold for: a detector's negative
NEGATIVES = pa.schema([("image_id", pa.string()), ("label", pa.string()), ("best_score", pa.float64()),
                       ("threshold", pa.float64()), ("model", pa.string())])


class ProposalsStage(Stage):
    """Region proposals with masks for one shard of images (see the module docstring)."""

    name = "proposals"
    resources = Resources(device="cpu", memory_mb=4000)
    # a shard without objects reads an empty objects table; ``root`` is one row naming the image folder
    inputs = {"images": schemas.IMAGES, "objects": schemas.OBJECTS, "root": pa.schema([("root", pa.string())])}
    outputs = {"regions": schemas.REGIONS, "negatives": NEGATIVES}

    def __init__(self, config: ProposalsConfig, device: str | None = None) -> None:
        super().__init__(config, device or config.device)
        self.config: ProposalsConfig = config

    def setup(self) -> None:
        from reasonvqa.tasks.proposals.detector import GroundingDinoDetector
        from reasonvqa.tasks.proposals.masks import build_segmenter
        from reasonvqa.tasks.proposals.tagging import build_tagger

        config = self.config
        device = self.device
        assert device is not None, "a stage that declares resources has its device resolved in __init__"
        self.stop_list = load_stop_list(config.tagging.stop_list, config.tagging.extra_stop_tags)
        self.tagger = build_tagger(config.tagging, device)
        self.detector = GroundingDinoDetector(config.detector, device)
        self.segmenter = build_segmenter(config.segmenter, device) if config.segmenter else None
        self.origin = "model:" + "+".join([self.detector.name] + ([self.segmenter.name] if self.segmenter else []))
        self.model_seconds = 0.0

    def teardown(self) -> None:
        for name in ("tagger", "detector", "segmenter"):
            if hasattr(self, name):
                delattr(self, name)

    # ---- one shard -------------------------------------------------------------------------

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        """Inputs: ``images`` (IMAGES rows, ``file_path`` relative to ``root``), ``objects``
        (their annotated labels, used by the ``labels`` tagger), and ``root`` as a one-cell table."""
        root = Path(inputs["root"].column(0)[0].as_py())
        items = image_items(inputs["images"], inputs.get("objects"), root)
        rejects = Rejects(self.name, ctx.shard)
        rows: list[dict] = []
        negatives: list[dict] = []
        stats: Counter[str] = Counter()
        per_call = self.config.images_per_call
        cache = ctx.cache
        assert cache is not None, "a stage that declares resources gets a call cache (run_stage_shard)"
        # closed on an error too: the loader threads stop and are joined before the error leaves
        with contextlib.closing(prefetched_batches(items, per_call, self.detector.transform)) as batches:
            for batch in batches:
                key = {"images": [(i.item.image_id, str(i.item.path), i.digest) for i in batch],
                       "config": self.config.model_dump(mode="json", exclude={"device", "image_roots"})}
                result = cache.call("proposals", key, functools.partial(self.propose, batch))
                for image in result:
                    rows += image["regions"]
                    negatives += image.get("negatives", [])  # a call cached before negatives were recorded: none
                    for drop in image["drops"]:
                        rejects.add(drop["reason"], drop["source"], drop["record"])
                    stats.update(image["stats"])
        rows.sort(key=lambda r: r["region_id"])
        table = schemas.from_rows(rows, schemas.REGIONS)
        negatives.sort(key=lambda r: (r["image_id"], r["label"]))
        rows_in = stats["candidates"] + stats["images_unreadable"]
        return StageResult({"regions": table, "negatives": pa.Table.from_pylist(negatives, schema=NEGATIVES)}, rejects,
                           rows_in=rows_in,
                           extra={"images": len(items), **dict(sorted(stats.items()))})

    # ---- one batch of images (one cached call) ---------------------------------------------

    def propose(self, batch: list[LoadedImage]) -> list[dict]:
        """Regions, drops and counts of each image in ``batch`` (read by the loader; JSON-serializable)."""
        started = time.perf_counter()
        results: dict[str, dict] = {}
        for loaded in batch:
            if loaded.error is not None:
                item = loaded.item
                results[item.image_id] = {"regions": [], "stats": {"images_unreadable": 1}, "drops": [{
                    "reason": IMAGE_UNREADABLE, "source": item.source,
                    "record": {"image_id": item.image_id, "error": loaded.error}}]}
        readable = [loaded for loaded in batch if loaded.error is None]
        tag_lists = self.tagger.tag([TagRequest(i.item.image_id, i.image, i.item.labels) for i in readable])
        pairs, inputs, owners, per_image_stats = [], [], [], {}
        for loaded, tags in zip(readable, tag_lists):
            kept, stopped = apply_stop_list(tags, self.stop_list)
            prompts, too_long = split_passes(kept, self.detector.tokenizer, self.config.detector.max_text_len)
            per_image_stats[loaded.item.image_id] = {"images_read": 1, "tags": len(kept), "tags_stop_listed": len(stopped),
                                                     "tags_too_long": len(too_long), "passes": len(prompts),
                                                     "images_without_tags": int(not kept)}
            for prompt in prompts:
                pairs.append((loaded.image, prompt))
                inputs.append(loaded.detector_input)
                owners.append(loaded.item)
        detections = self.detector.detect(pairs, inputs)
        grouped: dict[str, list] = defaultdict(list)
        for item, (_, prompt), found in zip(owners, pairs, detections):
            grouped[item.image_id].append((prompt, found))
        for loaded in readable:
            image_id = loaded.item.image_id
            results[image_id] = self._finish_image(loaded, grouped[image_id], per_image_stats[image_id])
        self.model_seconds += time.perf_counter() - started
        return [results[i.item.image_id] for i in batch]

    def _finish_image(self, loaded: LoadedImage, found: list, stats: dict) -> dict:
        """Class-count NMS, filters and masks for one image's candidates from every pass."""
        item, image = loaded.item, loaded.image
        boxes = np.concatenate([d.boxes for _, d in found]) if found else np.zeros((0, 4))
        labels = np.array([label for _, d in found for label in d.labels], dtype=object)
        scores = np.concatenate([d.scores for _, d in found]) if found else np.zeros(0)
        box_scores = np.concatenate([d.box_scores for _, d in found]) if found else np.zeros(0)
        prompts = [p.caption for p, d in found for _ in d.labels]
        passes = [k for k, (_, d) in enumerate(found) for _ in d.labels]
        cfg = self.config.suppression
        suppression = class_count_nms(boxes, scores, labels, cfg.iou_threshold)
        kept = suppression.keep
        width, height = image.size
        reasons = filter_reasons(boxes[kept], labels[kept], width, height, cfg.max_area_fraction, cfg.min_class_instances)
        final = [int(i) for i, reason in zip(kept, reasons) if reason is None]
        rank = {int(i): n for n, i in enumerate(kept)}

        def record(i: int, **more: Any) -> dict:
            return {"image_id": item.image_id, "label": labels[i], "box_xyxy": [round(float(v), 3) for v in boxes[i]],
                    "score": round(float(scores[i]), 6), "prompt": prompts[i], **more}

        drops = [{"reason": NMS_SUPPRESSED, "source": item.source,
                  "record": record(i, suppressed_by=f"{item.image_id}/p{rank[int(by)]}")}
                 for i, by in enumerate(suppression.suppressed_by) if by >= 0]
        drops += [{"reason": reason, "source": item.source, "record": record(int(i))}
                  for i, reason in zip(kept, reasons) if reason is not None]
        masks = self.segmenter.segment(loaded.pixels, boxes[final]) if self.segmenter and final else None
        regions = []
        for n, i in enumerate(final):
            x1, y1, x2, y2 = (float(v) for v in boxes[i])
            regions.append({
                "region_id": f"{item.image_id}/p{rank[i]}", "image_id": item.image_id, "label": str(labels[i]),
                "x": x1, "y": y1, "w": x2 - x1, "h": y2 - y1,
                "mask": masks.rles[n] if masks else None,
                "area": float(masks.areas[n]) if masks else (x2 - x1) * (y2 - y1),
                "score": float(np.float32(scores[i])),
                "predicted_iou": float(masks.predicted_iou[n]) if masks else None,
                "stability_score": _finite(masks.stability[n]) if masks and masks.stability is not None else None,
                "origin": self.origin, "prompt": prompts[i],
                "extra": json.dumps({"box_score": float(np.float32(box_scores[i])), "pass": passes[i],
                                     "tagger": self.tagger.name}, sort_keys=True),
            })
        counts = Counter(d["reason"] for d in drops)
        negatives = detector_negatives(item.image_id, found, set(labels.tolist()), self.config.detector.box_threshold,
                                       self.detector.name)
        return {"regions": regions, "drops": drops, "negatives": negatives,
                "stats": {**stats, "candidates": len(boxes), "regions": len(regions), "negatives": len(negatives), **counts}}



def detector_negatives(image_id: str, found: list, detected: set[str], threshold: float, model: str) -> list[dict]:
    """The prompted classes of one image (``found``: its (prompt, Detections) of every pass) with no candidate box
    (``detected``: the classes of its candidates) and no box probability reaching ``threshold``, each with the best
    probability the detector gave it."""
    best: dict[str, float] = {}
    for _, d in found:
        for label, score in d.best.items():
            best[label] = max(best.get(label, 0.0), score)
    return [{"image_id": image_id, "label": label, "best_score": round(score, 6), "threshold": threshold, "model": model}
            for label, score in sorted(best.items()) if label not in detected and score < threshold]


def _finite(value: float) -> float | None:
    """A float, or None for NaN (SAM's stability of a mask empty at both thresholds)."""
    return None if np.isnan(value) else float(value)


def image_items(images: pa.Table, objects: pa.Table | None, root: Path) -> list[ImageItem]:
    """The shard's images in image_id order, each with its file under ``root`` and its object labels."""
    labels: dict[str, list[str]] = defaultdict(list)
    if objects is not None and objects.num_rows:
        for image_id, label in zip(objects["image_id"].to_pylist(), objects["label"].to_pylist()):
            if label:
                labels[image_id].append(label)
    items = []
    for row in sorted(images.select(["image_id", "file_path"]).to_pylist(), key=lambda r: r["image_id"]):
        rel = row["file_path"] or ""
        items.append(ImageItem(row["image_id"], root / rel, rel or row["image_id"], tuple(sorted(set(labels[row["image_id"]])))))
    return items
