"""Label Studio: export a batch as tasks with predictions + the labeling config; import its JSON export.

One task per item. ``data`` holds the image (a URL, or a local-files path), the question,
answer and choices, and under ``reasonvqa`` our ids (batch, item, image, question and the
map from Label Studio region ids ``r<k>`` to our region ids). The prediction carries each
region as a rectangle (percent of the original size) or, when it has a mask, as a brush
mask in Label Studio's RLE, and the answer in an editable text area. Annotators accept or
reject each region (per-region choices), redraw or add regions, judge the question and may
correct the answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from reasonvqa.annotation_exports import masks
from reasonvqa.annotation_exports.batches import Batch, Item
from reasonvqa.annotation_exports.decisions import DecisionStore, ImportReport, StoreError, normalize_time
from reasonvqa.annotation_exports.importing import BadRecord, added_region_id, changed_geometry, decision, match_region

TASKS_FILE = "tasks.json"
CONFIG_FILE = "label_config.xml"
LOCAL_FILES_PREFIX = "/data/local-files/?d="
# control tag names of our labeling config; a result from any other tag is from another config
CONTROLS = {"box": "rectanglelabels", "mask": "brushlabels", "region_decision": "choices",
            "question_decision": "choices", "answer": "textarea"}
REGION_CHOICES = ("accept", "reject")
QUESTION_CHOICES = ("correct", "wrong")


def labeling_config(labels: list[str]) -> str:
    """The labeling config XML that matches our tasks (labels: the batch's region labels)."""
    label_tags = "".join(f"\n    <Label value={quoteattr(label)}/>" for label in labels)
    return f"""<View>
  <Image name="image" value="$image" zoom="true"/>
  <Header value="$question"/>
  <Text name="choices_text" value="$choices_text"/>
  <RectangleLabels name="box" toName="image">{label_tags}
  </RectangleLabels>
  <BrushLabels name="mask" toName="image">{label_tags}
  </BrushLabels>
  <Choices name="region_decision" toName="image" perRegion="true" choice="single">
    <Choice value="accept"/>
    <Choice value="reject"/>
  </Choices>
  <Choices name="question_decision" toName="image" choice="single" showInline="true">
    <Choice value="correct"/>
    <Choice value="wrong"/>
  </Choices>
  <TextArea name="answer" toName="image" editable="true" maxSubmissions="1" placeholder="answer"/>
</View>
"""


def config_hash(config: str) -> str:
    return "sha256:" + hashlib.sha256(config.encode()).hexdigest()


def image_url(info: dict, image_id: str, url_prefix: str) -> str:
    """The task's image: its URL, else ``url_prefix`` + its file name under the images folder."""
    if info.get("url"):
        return info["url"]
    return url_prefix + (info.get("file_name") or image_id.replace(":", "_").replace("/", "_"))


def rle_digest(rle: list[int] | bytes) -> str:
    """Short content id of a brush RLE: an annotation that returns it unchanged needs no decoding."""
    return hashlib.sha256(bytes(rle)).hexdigest()[:16]


def _region_result(key: str, region: dict, width: int, height: int, brush: object | None) -> dict:
    label = region["label"] or "region"
    base = {"id": key, "to_name": "image", "original_width": width, "original_height": height, "image_rotation": 0}
    if brush is not None:
        return {**base, "from_name": "mask", "type": "brushlabels",
                "value": {"format": "rle", "rle": brush, "brushlabels": [label]}}
    x, y, w, h = region["box"]
    return {**base, "from_name": "box", "type": "rectanglelabels",
            "value": {"x": 100.0 * x / width, "y": 100.0 * y / height, "width": 100.0 * w / width,
                      "height": 100.0 * h / height, "rotation": 0, "rectanglelabels": [label]}}


def task_for(batch: Batch, item: Item, url_prefix: str, cfg_hash: str, brushes: dict[str, object],
             digests: dict[str, str]) -> dict:
    """One Label Studio task (data + one prediction) for ``item``.

    ``brushes``: region id -> the value its brush result's ``rle`` holds; ``digests``: region id
    -> ``rle_digest`` of its brush RLE.
    """
    info = batch.images[item.image_id]
    width, height = int(info["width"]), int(info["height"])
    keys = {f"r{k}": region_id for k, region_id in enumerate(item.region_ids)}
    results = [_region_result(key, batch.regions[rid], width, height, brushes.get(rid)) for key, rid in keys.items()]
    if item.question_id is not None:
        results.append({"id": "answer", "from_name": "answer", "to_name": "image", "type": "textarea",
                        "value": {"text": [item.answer or ""]}})
    return {
        "data": {
            "image": image_url(info, item.image_id, url_prefix),
            "question": item.question or "",
            "answer": item.answer or "",
            "choices_text": " | ".join(item.choices),
            "reasonvqa": {"batch_id": batch.batch_id, "item_id": item.item_id, "image_id": item.image_id,
                          "question_id": item.question_id, "regions": keys,
                          "mask_digests": {key: digests[rid] for key, rid in keys.items() if rid in digests},
                          "width": width, "height": height, "label_config": cfg_hash},
        },
        "predictions": [{"model_version": f"reasonvqa:{batch.batch_id}", "result": results}],
    }


# A brush result's "rle" is written as a slot number, then replaced by the JSON text of its
# byte list: each region's RLE is formatted once although every item of its image shows it.
# Only brush values have an "rle" key, and a quote inside a JSON string is escaped, so the
# pattern cannot match text of a question or label.
_RLE_SLOT = re.compile(r'"rle":(\d+)')


_BYTE_TEXT = [str(v) for v in range(256)]


def _byte_list_json(raw: bytes) -> str:
    """``json.dumps(list(raw), separators=(",", ":"))``, faster."""
    return "[" + ",".join(map(_BYTE_TEXT.__getitem__, raw)) + "]"


def export_labelstudio(batch: Batch, out: Path, url_prefix: str = LOCAL_FILES_PREFIX) -> list[Path]:
    """Write ``tasks.json`` and ``label_config.xml`` for ``batch`` into ``out``.

    ``tasks.json`` holds the bytes ``json.dump(tasks, sort_keys=True, separators=(",", ":"))``
    would write, written one task at a time.
    """
    out.mkdir(parents=True, exist_ok=True)
    config = labeling_config(batch.labels())
    cfg_hash = config_hash(config)
    slots: dict[str, int] = {}
    texts: list[str] = []
    digests: dict[str, str] = {}
    for rid, region in batch.regions.items():  # once per region, shared by the items of its image
        if region["mask"] is not None:
            raw = masks.labelstudio_encode_coco(region["mask"])
            slots[rid], digests[rid] = len(texts), rle_digest(raw)
            texts.append(_byte_list_json(raw))

    def fill(match: re.Match) -> str:
        return '"rle":' + texts[int(match.group(1))]

    (out / CONFIG_FILE).write_text(config, encoding="utf-8")
    with (out / TASKS_FILE).open("w", encoding="utf-8") as handle:
        handle.write("[")
        for n, item in enumerate(batch.items):
            text = json.dumps(task_for(batch, item, url_prefix, cfg_hash, slots, digests), sort_keys=True,
                              separators=(",", ":"))
            handle.write(("," if n else "") + _RLE_SLOT.sub(fill, text))
        handle.write("]\n")
    return [out / TASKS_FILE, out / CONFIG_FILE]


# --- import ------------------------------------------------------------------------------------

def _annotator(annotation: dict) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    return f"labelstudio:{who}" if who is not None else "labelstudio:unknown"


def _check_size(result: dict, width: int, height: int) -> None:
    if (result.get("original_width"), result.get("original_height")) != (width, height):
        raise BadRecord("size_mismatch", f"result is for a {result.get('original_width')}x{result.get('original_height')} "
                                         f"image, the batch's image is {width}x{height}")


def _unchanged_brush(result: dict, digest: str | None) -> bool:
    rle = (result.get("value") or {}).get("rle")
    try:
        return digest is not None and isinstance(rle, list) and rle_digest(rle) == digest
    except (TypeError, ValueError):
        return False


def _geometry(result: dict, width: int, height: int) -> tuple[np.ndarray | None, list[float] | None, str | None]:
    """Mask (HxW 0/1) or box (XYWH pixels) and label of a region result."""
    value = result.get("value") or {}
    if result["type"] == "brushlabels":
        if value.get("format", "rle") != "rle":
            raise BadRecord("malformed_rle", f"brush format {value.get('format')!r} is not rle")
        try:
            mask = masks.labelstudio_decode(value.get("rle"), width, height)
        except masks.MaskError as exc:
            raise BadRecord("malformed_rle", str(exc)) from None
        return mask, None, (value.get("brushlabels") or [None])[0]
    try:
        x, y, w, h = (float(value[k]) for k in ("x", "y", "width", "height"))
    except (KeyError, TypeError, ValueError):
        raise BadRecord("malformed_geometry", "rectangle lacks x, y, width or height") from None
    if float(value.get("rotation") or 0) != 0:
        raise BadRecord("malformed_geometry", "rotated rectangles are not regions of the record model")
    return None, [x * width / 100, y * height / 100, w * width / 100, h * height / 100], (value.get("rectanglelabels") or [None])[0]


def _region_decisions(batch: Batch, item: Item, keys: dict[str, str], digests: dict[str, str], results: list[dict],
                      who: str, when: str, where: str, report: ImportReport) -> None:
    info = batch.images[item.image_id]
    width, height = int(info["width"]), int(info["height"])
    shapes: dict[str, tuple[int, dict]] = {}
    verdicts: dict[str, tuple[int, str]] = {}
    for k, result in enumerate(results):
        if result.get("from_name") == "region_decision":
            choice = ((result.get("value") or {}).get("choices") or [None])[0]
            if choice not in REGION_CHOICES:
                report.rejects.append({"reason": "unknown_choice", "source": f"{where}.result[{k}]", "detail": str(choice)})
            else:
                verdicts[str(result.get("id"))] = (k, choice)
        elif result.get("from_name") in ("box", "mask"):
            shapes[str(result.get("id"))] = (k, result)
    for rid in sorted(set(shapes) | set(verdicts)):
        k = shapes[rid][0] if rid in shapes else verdicts[rid][0]
        source = f"{where}.result[{k}]"
        try:
            mask = box = label = None
            if rid in shapes:
                _check_size(shapes[rid][1], width, height)
            unchanged = rid in keys and rid in shapes and _unchanged_brush(shapes[rid][1], digests.get(rid))
            if rid in shapes and not unchanged:
                mask, box, label = _geometry(shapes[rid][1], width, height)
            rle = masks.coco_encode(mask) if mask is not None else None
            region_id = keys.get(rid)
            if region_id is None and (mask is not None or box is not None):
                region_id = match_region(batch, item, mask, box, rle)
            verdict = verdicts.get(rid, (k, None))[1]
            if region_id is None and mask is None and box is None and not unchanged:
                raise BadRecord("unknown_region_id", f"region {rid!r} is not in the task and has no geometry to match")
            common = {"annotator": who, "time": when, "source": source}
            if region_id is None:  # drawn by the annotator
                if verdict == "reject":
                    continue  # drawn and rejected in the same annotation: nothing to add
                geometry = rle["counts"] if rle else json.dumps([round(v, 4) for v in box])
                box = masks.coco_area_and_box(rle)[1] if rle else box
                report.decisions.append(decision(batch, item, target="region", action="add", label=label or "region",
                                                 region_id=added_region_id(item.image_id, who, geometry),
                                                 box=box, mask=rle, **common))
                continue
            if verdict == "reject":
                report.decisions.append(decision(batch, item, target="region", action="reject", region_id=region_id, **common))
                continue
            edited = changed_geometry(batch.regions[region_id], mask, box, rle)
            if edited is not None:
                report.decisions.append(decision(batch, item, target="region", action="edit", region_id=region_id,
                                                 label=label, box=edited[1], mask=edited[0], **common))
            elif verdict == "accept":
                report.decisions.append(decision(batch, item, target="region", action="accept", region_id=region_id, **common))
        except masks.MaskError as exc:
            report.rejects.append({"reason": "malformed_rle", "source": source, "detail": str(exc)})
        except BadRecord as exc:
            report.rejects.append({"reason": exc.reason, "source": source, "detail": str(exc)})


def _question_decision(batch: Batch, item: Item, results: list[dict], who: str, when: str, where: str,
                       report: ImportReport) -> None:
    verdicts, text, source = set(), None, where
    for k, result in enumerate(results):
        value = result.get("value") or {}
        if result.get("from_name") == "question_decision":
            source = f"{where}.result[{k}]"
            verdicts.update(value.get("choices") or [])
            if not verdicts <= set(QUESTION_CHOICES):
                report.rejects.append({"reason": "unknown_choice", "source": source, "detail": str(sorted(verdicts))})
                return
        elif result.get("from_name") == "answer":
            texts = value.get("text") or []
            text = str(texts[-1]).strip() if texts else ""
            source = f"{where}.result[{k}]"
    if len(verdicts) > 1:
        report.rejects.append({"reason": "conflicting_decisions", "source": source,
                               "detail": f"question judged {sorted(verdicts)} in one annotation"})
        return
    verdict = next(iter(verdicts), None)
    common = {"annotator": who, "time": when, "source": source}
    if text is not None and text != (item.answer or "").strip():
        if not text:
            report.rejects.append({"reason": "empty_answer", "source": source, "detail": "the corrected answer is empty"})
            return
        report.decisions.append(decision(batch, item, target="question", action="edit_answer", answer=text, **common))
    elif verdict is not None:
        report.decisions.append(decision(batch, item, target="question", action=verdict, **common))


def parse_labelstudio(data: bytes, name: str, store: DecisionStore, report: ImportReport) -> None:
    """Fill ``report`` from a Label Studio JSON export (a list of tasks with annotations)."""
    try:
        tasks = json.loads(data)  # not orjson: it makes an object per integer (1.5 GB, not 0.85 GB, for 10,000 tasks)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{name}: not JSON ({exc})") from None
    if not isinstance(tasks, list):
        raise StoreError(f"{name}: a Label Studio JSON export is a list of tasks, got {type(tasks).__name__}")
    batches: dict[str, tuple[Batch, dict[str, Item], str] | None] = {}
    for i, task in enumerate(tasks):
        where = f"{name}#[{i}]"
        meta = (task.get("data") or {}).get("reasonvqa") if isinstance(task, dict) else None
        if not isinstance(meta, dict):
            report.rejects.append({"reason": "labeling_config_mismatch", "source": where,
                                   "detail": "task has no reasonvqa ids: not exported by reasonvqa"})
            continue
        batch_id = str(meta.get("batch_id"))
        if batch_id not in batches:
            batch = store.batch(batch_id)
            batches[batch_id] = (batch, {it.item_id: it for it in batch.items},
                                 config_hash(labeling_config(batch.labels()))) if batch else None
        if batches[batch_id] is None:
            report.rejects.append({"reason": "unknown_batch", "source": where, "detail": batch_id})
            continue
        batch, items, expected = batches[batch_id]
        item = items.get(meta.get("item_id"))
        if item is None:
            report.rejects.append({"reason": "unknown_item", "source": where, "detail": str(meta.get("item_id"))})
            continue
        keys = {k: v for k, v in (meta.get("regions") or {}).items() if v in item.region_ids}
        digests = meta.get("mask_digests") or {}
        for j, annotation in enumerate(task.get("annotations") or []):
            _one_annotation(batch, item, keys, digests, annotation, f"{where}.annotations[{j}]",
                            meta.get("label_config") == expected, report)


def _one_annotation(batch: Batch, item: Item, keys: dict[str, str], digests: dict[str, str], annotation: dict,
                    where: str, same_config: bool, report: ImportReport) -> None:
    if annotation.get("was_cancelled"):
        report.rejects.append({"reason": "cancelled_annotation", "source": where, "detail": "skipped by the annotator"})
        return
    results = annotation.get("result") or []
    foreign = sorted({str(r.get("from_name")) for r in results if CONTROLS.get(r.get("from_name")) != r.get("type")
                      or r.get("to_name") != "image"})
    if foreign or not same_config:
        detail = f"results from controls {foreign} not in our labeling config" if foreign else "task made with another labeling config"
        report.rejects.append({"reason": "labeling_config_mismatch", "source": where, "detail": detail})
        return
    try:
        when = normalize_time(annotation.get("updated_at") or annotation.get("created_at"))
    except (TypeError, ValueError):
        report.rejects.append({"reason": "bad_time", "source": where, "detail": "annotation has no readable time"})
        return
    who = _annotator(annotation)
    _region_decisions(batch, item, keys, digests, results, who, when, where, report)
    if item.question_id is not None:
        _question_decision(batch, item, results, who, when, where, report)
