"""Parse single Visual Genome records across file versions into plain values.

Field drift handled (v1.0 / v1.2 / v1.4 and ``scene_graphs.json``):

* image records: ``image_id`` or ``id``;
* objects: ``object_id`` or ``id``; ``names`` (list) or ``name`` (string, as in
  relationship subjects/objects); ``synsets`` as strings or ``{"synset_name": ...}``
  dicts, missing or empty; box ``w``/``h`` or ``width``/``height``; v1.4
  ``merged_object_ids`` (ids of older objects folded into this one);
* relationships: ``relationship_id`` or ``id``; endpoints as embedded objects
  (``subject``/``object``) or as ids (``subject_id``/``object_id``, scene graphs).

Each parser returns a value or a short reject reason, never raises on bad input.

Box policy (stated once, here): coordinates must be finite numbers, ``w`` and ``h``
strictly positive. A box that overhangs the image is clipped to it when at least
``MIN_VISIBLE_FRACTION`` of its area lies inside; a box with less inside is rejected
(``box_mostly_outside``), one with nothing inside too (``box_outside_image``).
"""

from __future__ import annotations

from typing import NamedTuple

from reasonvqa.tasks.sources.normalize import as_int_id, as_number, is_number, normalize_label

MIN_VISIBLE_FRACTION = 0.5


class ImageEntry(NamedTuple):
    """One valid row of image_data.json."""

    image_id: int
    width: int
    height: int
    url: str | None


class ObjectEntry(NamedTuple):
    """One valid object, box already clipped to its image."""

    object_id: int
    names: list[str]
    synsets: list[str]
    box: tuple[float, float, float, float]
    clipped: bool
    merged_ids: list[int]


class RelationEntry(NamedTuple):
    """One relationship with its endpoint ids (not yet resolved against the image's objects)."""

    relationship_id: int
    predicate: str
    synset: str | None
    subject_id: int
    object_id: int
    subject_name: str | None
    object_name: str | None


_INT32_MAX = 2**31 - 1


def record_image_id(record: object) -> int | None:
    """The image id of a per-image record (``image_id`` or the older ``id``)."""
    if not isinstance(record, dict):
        return None
    value = record.get("image_id", record.get("id"))
    return as_int_id(value)


def parse_image_entry(record: object) -> ImageEntry | str:
    """An image_data.json row, or a reject reason."""
    if not isinstance(record, dict):
        return "image_record_malformed"
    image_id = record_image_id(record)
    if image_id is None:
        return "image_missing_id"
    width, height = as_number(record.get("width")), as_number(record.get("height"))
    if (width is None or height is None or not 0 < width <= _INT32_MAX or not 0 < height <= _INT32_MAX
            or not width.is_integer() or not height.is_integer()):  # IMAGES.width/height are int32
        return "image_bad_size"
    url = record.get("url")
    return ImageEntry(image_id, int(width), int(height), url if isinstance(url, str) and url else None)


def object_names(record: dict) -> list[str]:
    """Normalized, de-duplicated names from ``names`` (list or string) or ``name``."""
    raw = record.get("names")
    if raw is None:
        raw = record.get("name")
    if type(raw) is list and len(raw) == 1 and type(raw[0]) is str:  # the common case, fast
        name = " ".join(raw[0].lower().split())
        return [name] if name else []
    names: list[str] = []
    for value in raw if isinstance(raw, list) else [raw]:
        label = normalize_label(value)
        if label is not None and label not in names:
            names.append(label)
    return names


def synset_names(raw: object) -> list[str]:
    """Synset names from a list (or single value) of strings or ``{"synset_name": ...}`` dicts."""
    if type(raw) is list and len(raw) == 1 and type(raw[0]) is str:  # the common case, fast
        name = raw[0].strip()
        return [name] if name else []
    names: list[str] = []
    for value in raw if isinstance(raw, list) else ([] if raw is None else [raw]):
        if isinstance(value, dict):
            value = value.get("synset_name")
        if isinstance(value, str) and value.strip() and value.strip() not in names:
            names.append(value.strip())
    return names


def object_id_of(record: object) -> int | None:
    """``object_id`` or the older ``id`` of an object-like dict."""
    if not isinstance(record, dict):
        return None
    return as_int_id(record.get("object_id", record.get("id")))


def clip_box(x: float, y: float, w: float, h: float, width: int, height: int) -> tuple[tuple[float, float, float, float], bool] | str:
    """Clip a positive-size XYWH box to the image (see the module's box policy)."""
    if x >= 0 and y >= 0 and x + w <= width and y + h <= height:  # inside: nothing to clip
        return (x, y, w, h), False
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, width), min(y + h, height)
    if x1 <= x0 or y1 <= y0:
        return "box_outside_image"
    if (x1 - x0) * (y1 - y0) < MIN_VISIBLE_FRACTION * w * h:
        return "box_mostly_outside"
    return (x0, y0, x1 - x0, y1 - y0), True


def parse_object(record: object, image: ImageEntry) -> ObjectEntry | str:
    """An object of ``image``, or a reject reason."""
    if type(record) is not dict:
        return "object_malformed"
    object_id = record.get("object_id")
    if type(object_id) is not int or object_id < 0:
        object_id = object_id_of(record)
        if object_id is None:
            return "object_missing_id"
    names = object_names(record)
    if not names:
        return "object_missing_name"
    x, y, w, h = record.get("x"), record.get("y"), record.get("w"), record.get("h")
    if w is None:
        w = record.get("width")
    if h is None:
        h = record.get("height")
    if x is None or y is None or w is None or h is None:
        return "box_missing"
    if not (type(x) is int and type(y) is int and type(w) is int and type(h) is int) and not (
        is_number(x) and is_number(y) and is_number(w) and is_number(h)
    ):
        return "box_not_numeric"
    if w <= 0 or h <= 0:
        return "box_nonpositive_size"
    fitted = clip_box(x, y, w, h, image.width, image.height)
    if isinstance(fitted, str):
        return fitted
    merged = record.get("merged_object_ids")
    merged_ids = [i for i in (as_int_id(v) for v in merged) if i is not None] if isinstance(merged, list) else []
    return ObjectEntry(object_id, names, synset_names(record.get("synsets")), fitted[0], fitted[1], merged_ids)


def _endpoint(record: dict, role: str) -> tuple[int, str | None] | None:
    """Endpoint id and name from an embedded object (``subject``) or a bare id (``subject_id``)."""
    embedded = record.get(role)
    if isinstance(embedded, dict):
        object_id = object_id_of(embedded)
        names = object_names(embedded)
        return (object_id, names[0] if names else None) if object_id is not None else None
    if embedded is not None:
        return None
    object_id = as_int_id(record.get(f"{role}_id"))
    return (object_id, None) if object_id is not None else None


def parse_relation(record: object) -> RelationEntry | str:
    """A relationship, or a reject reason."""
    if not isinstance(record, dict):
        return "relation_malformed"
    relationship_id = as_int_id(record.get("relationship_id", record.get("id")))
    if relationship_id is None:
        return "relation_missing_id"
    predicate = normalize_label(record.get("predicate"))
    if predicate is None:
        return "relation_missing_predicate"
    subject, obj = _endpoint(record, "subject"), _endpoint(record, "object")
    if subject is None or obj is None:
        return "relation_endpoint_malformed"
    synsets = synset_names(record.get("synsets"))
    return RelationEntry(relationship_id, predicate, synsets[0] if synsets else None, subject[0], obj[0], subject[1], obj[1])
