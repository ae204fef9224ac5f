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
from typing import Any, Mapping
from xml.sax.saxutils import quoteattr

import numpy as np

from reasonvqa import masks
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
MAX_DEPTH = 64  # how deep an export may nest (our tasks nest 6 levels)
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


def task_for(batch: Batch, item: Item, url_prefix: str, cfg_hash: str, brushes: Mapping[str, object],
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
# An export is people's work edited by hand and by scripts: every value is checked for its shape
# before use, and a record of the wrong shape is one reject located at ``file#task-id``.

def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _object(value: object, what: str) -> dict:
    if not isinstance(value, dict):
        raise BadRecord("malformed_record", f"{what} is {_kind(value)}, not an object")
    return value


def _list(value: object, what: str) -> list:
    """A list; null (a field Label Studio leaves out or writes as null) is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRecord("malformed_record", f"{what} is {_kind(value)}, not a list")
    return value


def _texts(value: dict, key: str) -> list[str]:
    """The strings of a choices / text / labels field: a list of strings (a bare string is one)."""
    texts = value.get(key)
    if isinstance(texts, str):
        return [texts]
    if texts is None or (isinstance(texts, list) and all(isinstance(t, str) for t in texts)):
        return texts or []
    raise BadRecord("malformed_record", f"{key} is {_kind(texts)} {texts!r:.60}, not a list of text")


def _text_id(value: object, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise BadRecord("malformed_record", f"{what} {value!r:.60} is not an id")
    return str(value)


def _task_key(task: object, i: int) -> str:
    """Where a task is named in rejects: its Label Studio id, else its place in the file."""
    tid = task.get("id") if isinstance(task, dict) else None
    named = (isinstance(tid, int) and not isinstance(tid, bool)) or (isinstance(tid, str) and tid.isalnum())
    return str(tid) if named else f"[{i}]"


def _annotator(annotation: dict) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    if who is None:
        return "labelstudio:unknown"
    if isinstance(who, bool) or not isinstance(who, (int, str)) or not str(who).strip() or "\n" in str(who):
        raise BadRecord("bad_annotator", f"completed_by {who!r:.60} is not a user id or email")
    return f"labelstudio:{str(who).strip()}"


def _time(annotation: dict) -> str:
    value = annotation.get("updated_at") or annotation.get("created_at")
    if value is None:
        raise BadRecord("bad_time", "annotation has no time (updated_at, created_at)")
    try:
        return normalize_time(value)  # text only: a number is no time zone-free epoch guess
    except (TypeError, ValueError, OverflowError):
        raise BadRecord("bad_time", f"annotation time {value!r:.60} is not an ISO 8601 time") from None


def _check_size(result: dict, width: int, height: int) -> None:
    if (result.get("original_width"), result.get("original_height")) != (width, height):
        raise BadRecord("size_mismatch", f"result is for a {result.get('original_width')!r:.20}x{result.get('original_height')!r:.20} "
                                         f"image, the batch's image is {width}x{height}")


def _unchanged_brush(result: dict, digest: str | None) -> bool:
    rle = (result.get("value") or {}).get("rle") if isinstance(result.get("value"), dict) else None
    try:
        return digest is not None and isinstance(rle, list) and rle_digest(rle) == digest
    except (TypeError, ValueError):
        return False


def _geometry(result: dict, width: int, height: int) -> tuple[np.ndarray | None, list[float] | None, str | None]:
    """Mask (HxW 0/1) or box (XYWH pixels) and label of a region result."""
    value = _object(result.get("value"), "the result's value")
    if result["type"] == "brushlabels":
        if value.get("format", "rle") != "rle":
            raise BadRecord("malformed_rle", f"brush format {value.get('format')!r:.40} is not rle")
        try:
            rle: Any = value.get("rle")  # any JSON value: labelstudio_decode checks it is a list of bytes
            mask = masks.labelstudio_decode(rle, width, height)
        except masks.MaskError as exc:
            raise BadRecord("malformed_rle", str(exc)) from None
        return mask, None, next(iter(_texts(value, "brushlabels")), None)
    try:
        x, y, w, h = (float(value[k]) for k in ("x", "y", "width", "height"))
        rotation = float(value.get("rotation") or 0)
    except (KeyError, TypeError, ValueError, OverflowError):
        raise BadRecord("malformed_geometry", "rectangle lacks x, y, width or height as numbers") from None
    if rotation != 0:
        raise BadRecord("malformed_geometry", "rotated rectangles are not regions of the record model")
    return None, [x * width / 100, y * height / 100, w * width / 100, h * height / 100], next(iter(_texts(value, "rectanglelabels")), None)


def _region_decisions(batch: Batch, item: Item, keys: dict[str, str], digests: dict[str, str], results: list[dict],
                      who: str, when: str, where: str, report: ImportReport) -> None:
    info = batch.images[item.image_id]
    width, height = int(info["width"]), int(info["height"])
    shapes: dict[str, tuple[int, dict]] = {}
    verdicts: dict[str, tuple[int, str]] = {}
    for k, result in enumerate(results):
        if result.get("from_name") == "region_decision":
            try:
                choice = next(iter(_texts(_object(result.get("value"), "the result's value"), "choices")), None)
            except BadRecord as exc:
                report.rejects.append({"reason": exc.reason, "source": f"{where}.result[{k}]", "detail": str(exc)})
                continue
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
            common: dict[str, Any] = {"annotator": who, "time": when, "source": source}
            if region_id is None:  # drawn by the annotator
                if verdict == "reject":
                    continue  # drawn and rejected in the same annotation: nothing to add
                if rle:
                    geometry = rle["counts"]
                else:
                    assert box is not None, "a region drawn without a mask has a box (checked above)"
                    geometry = json.dumps([round(v, 4) for v in box])
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
    try:
        for k, result in enumerate(results):
            if result.get("from_name") == "question_decision":
                source = f"{where}.result[{k}]"
                verdicts.update(_texts(_object(result.get("value"), "the result's value"), "choices"))
                if not verdicts <= set(QUESTION_CHOICES):
                    raise BadRecord("unknown_choice", str(sorted(verdicts)))
            elif result.get("from_name") == "answer":
                source = f"{where}.result[{k}]"
                texts = _texts(_object(result.get("value"), "the result's value"), "text")
                text = texts[-1].strip() if texts else ""
        if len(verdicts) > 1:
            raise BadRecord("conflicting_decisions", f"question judged {sorted(verdicts)} in one annotation")
        verdict = next(iter(verdicts), None)
        common: dict[str, Any] = {"annotator": who, "time": when, "source": source}
        if text is not None and text != (item.answer or "").strip():
            if not text:
                raise BadRecord("empty_answer", "the corrected answer is empty")
            report.decisions.append(decision(batch, item, target="question", action="edit_answer", answer=text, **common))
        elif verdict is not None:
            report.decisions.append(decision(batch, item, target="question", action=verdict, **common))
    except BadRecord as exc:
        report.rejects.append({"reason": exc.reason, "source": source, "detail": str(exc)})


def load_export(data: bytes, name: str) -> list:
    """The tasks of a Label Studio JSON export; StoreError (one line naming the file) when it is no such list."""
    try:
        tasks = json.loads(data)  # not orjson: it makes an object per integer (1.5 GB, not 0.85 GB, for 10,000 tasks)
    except RecursionError:
        raise StoreError(f"{name}: {nesting_problem(data)}; a Label Studio export nests a few levels") from None
    except ValueError as exc:  # not JSON, not UTF-8, or a number of more digits than Python converts
        raise StoreError(f"{name}: not JSON ({' '.join(str(exc).split())})") from None
    if not isinstance(tasks, list):
        raise StoreError(f"{name}: a Label Studio JSON export is a list of tasks, got {_kind(tasks)}")
    return tasks


def nesting_problem(data: bytes, max_depth: int = MAX_DEPTH) -> str:
    """Where ``data`` (JSON) first nests deeper than ``max_depth``, as words."""
    from reasonvqa.jsonstream import deepest_point

    at = deepest_point(data, max_depth)
    return f"nesting deeper than {max_depth} levels" + (f" at byte {at}" if at is not None else "")


def parse_labelstudio(data: bytes, name: str, store: DecisionStore, report: ImportReport) -> None:
    """Fill ``report`` from a Label Studio JSON export (a list of tasks with annotations)."""
    tasks = load_export(data, name)
    batches: dict[str, tuple[Batch, dict[str, Item], str] | None] = {}
    for i, task in enumerate(tasks):
        where = f"{name}#{_task_key(task, i)}"
        try:
            _one_task(task, where, store, batches, report)
        except BadRecord as exc:
            report.rejects.append({"reason": exc.reason, "source": where, "detail": str(exc)})


def _one_task(task: object, where: str, store: DecisionStore, batches: dict, report: ImportReport) -> None:
    task = _object(task, "the task")
    meta = _object(task.get("data"), "the task's data").get("reasonvqa")
    if not isinstance(meta, dict):
        raise BadRecord("labeling_config_mismatch", "task has no reasonvqa ids: not exported by reasonvqa")
    batch_id = _text_id(meta.get("batch_id"), "batch_id")
    if batch_id not in batches:
        batch = store.batch(batch_id)
        batches[batch_id] = (batch, {it.item_id: it for it in batch.items},
                             config_hash(labeling_config(batch.labels()))) if batch else None
    if batches[batch_id] is None:
        raise BadRecord("unknown_batch", batch_id)
    batch, items, expected = batches[batch_id]
    item = items.get(_text_id(meta.get("item_id"), "item_id"))
    if item is None:
        raise BadRecord("unknown_item", str(meta.get("item_id")))
    regions = _object(meta.get("regions") if meta.get("regions") is not None else {}, "reasonvqa.regions")
    keys = {k: v for k, v in regions.items() if isinstance(v, str) and v in item.region_ids}
    digests = {k: v for k, v in _object(meta.get("mask_digests") or {}, "reasonvqa.mask_digests").items() if isinstance(v, str)}
    for j, annotation in enumerate(_list(task.get("annotations"), "annotations")):
        source = f"{where}.annotations[{j}]"
        try:
            _one_annotation(batch, item, keys, digests, _object(annotation, "the annotation"), source,
                            meta.get("label_config") == expected, report)
        except BadRecord as exc:
            report.rejects.append({"reason": exc.reason, "source": source, "detail": str(exc)})


def _one_annotation(batch: Batch, item: Item, keys: dict[str, str], digests: dict[str, str], annotation: dict,
                    where: str, same_config: bool, report: ImportReport) -> None:
    if annotation.get("was_cancelled"):
        raise BadRecord("cancelled_annotation", "skipped by the annotator")
    results = _list(annotation.get("result"), "result")
    for k, result in enumerate(results):
        _object(result, f"result[{k}]")
        if result.get("value") is None:  # never skipped as if the control were untouched
            raise BadRecord("malformed_record", f"result[{k}] ({result.get('from_name')!r:.40}) has a null value")
    foreign = sorted({str(r.get("from_name")) for r in results if not isinstance(r.get("from_name"), str)
                      or CONTROLS.get(r.get("from_name")) != r.get("type") or r.get("to_name") != "image"})
    if foreign or not same_config:
        detail = f"results from controls {foreign} not in our labeling config" if foreign else "task made with another labeling config"
        raise BadRecord("labeling_config_mismatch", detail)
    when = _time(annotation)
    who = _annotator(annotation)
    _region_decisions(batch, item, keys, digests, results, who, when, where, report)
    if item.question_id is not None:
        _question_decision(batch, item, results, who, when, where, report)
