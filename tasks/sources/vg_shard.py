"""Build one Visual Genome shard (images, objects, relations, attributes) from raw records.

Accounting unit (``rows_in``): one image_data row, one object, one relationship or one
attribute value (a string in an object's ``attributes`` list). Each ends as exactly
one output row or one reject. A per-image record that cannot be split into items
(not a dict, no image id, no ``objects``/``relationships``/``attributes`` list) counts
as one item. Records must be fed in this order for a shard: image rows, the primary
file (objects.json or scene_graphs.json), attributes.json, relationships.json, so
that attributes and relationships resolve against all of the shard's objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.stage import Rejects, StageResult
from tasks.sources.jsonstream import StreamFailure
from tasks.sources.normalize import normalize_label
from tasks.sources.vg_records import (
    ImageEntry,
    ObjectEntry,
    object_id_of,
    parse_image_entry,
    parse_object,
    parse_relation,
    record_image_id,
)

STAGE = "sources_vg"
ORIGIN = "annotation:vg"


@dataclass
class ImageIndex:
    """Every image_data.json row in file order: position of each image id and its parsed entry."""

    entries: list[ImageEntry | str]  # parsed entry or reject reason, by position
    rejected_raw: dict[int, Any] = field(default_factory=dict)  # position -> raw row, rejected rows only
    position: dict[int, int] = field(default_factory=dict)  # image id -> position of its first row

    def status(self, image_id: int | None) -> ImageEntry | str:
        """The image's entry, or why its annotations cannot be kept."""
        pos = self.position.get(image_id) if image_id is not None else None
        if pos is None:
            return "image_not_in_image_data"
        entry = self.entries[pos]
        return entry if isinstance(entry, ImageEntry) else "image_rejected"


def build_image_index(rows: list[Any]) -> ImageIndex:
    """Parse image_data.json rows; the first row of a repeated id owns its position."""
    index = ImageIndex([])
    for pos, row in enumerate(rows):
        entry = parse_image_entry(row)
        image_id = entry.image_id if isinstance(entry, ImageEntry) else record_image_id(row)
        if image_id is not None:
            if image_id in index.position:
                entry = "duplicate_image_id"
            else:
                index.position[image_id] = pos
        if isinstance(entry, str):
            index.rejected_raw[pos] = row
        index.entries.append(entry)
    return index


def vg_image_id(image_id: int) -> str:
    return f"vg:{image_id}"


def vg_file_path(image_id: int, url: str | None) -> str | None:
    """``VG_100K/<id>.jpg`` or ``VG_100K_2/<id>.jpg``, taken from the image URL's folder."""
    if not url:
        return None
    parts = url.rstrip("/").split("/")
    return f"{parts[-2]}/{image_id}.jpg" if len(parts) >= 2 and parts[-2].startswith("VG_100K") else None


@dataclass
class _ImageObjects:
    labels: dict[int, str] = field(default_factory=dict)  # object id -> label
    aliases: dict[int, int] = field(default_factory=dict)  # merged (old) object id -> object id
    attributes: set[tuple[int, str]] = field(default_factory=set)
    relation_ids: set[int] = field(default_factory=set)
    triples: set[tuple[int, str, int]] = field(default_factory=set)

    def resolve(self, object_id: int) -> int | None:
        if object_id in self.labels:
            return object_id
        return self.aliases.get(object_id)


class VgShardBuilder:
    """Collects one shard's rows and rejects; ``result()`` returns the sorted StageResult."""

    def __init__(self, shard: int, index: ImageIndex, extra: dict[str, Any] | None = None) -> None:
        self.shard = shard
        self.index = index
        self.rejects = Rejects(STAGE, shard)
        self.rows_in = 0
        self.extra = dict(extra or {})
        self.boxes_clipped = 0
        self._images: list[tuple[tuple, dict]] = []
        self._objects: list[tuple[tuple, dict]] = []
        self._relations: list[tuple[tuple, dict]] = []
        self._attributes: list[tuple[tuple, dict]] = []
        self._per_image: dict[int, _ImageObjects] = {}

    # -- helpers -----------------------------------------------------------------------------
    def _reject(self, reason: str, source: str, record: Any) -> None:
        self.rows_in += 1
        self.rejects.add(reason, source, record)

    def _reject_each(self, reason: str, items: list[tuple[str, Any]]) -> None:
        for source, record in items:
            self._reject(reason, source, record)

    def _pos(self, image_id: int) -> int:
        return self.index.position[image_id]

    # -- image_data.json ---------------------------------------------------------------------
    def add_image_row(self, pos: int) -> None:
        """The image_data.json row at ``pos`` (already parsed in the index)."""
        entry = self.index.entries[pos]
        source = f"image_data.json#[{pos}]"
        if not isinstance(entry, ImageEntry):
            self._reject(entry, source, self.index.rejected_raw[pos])
            return
        self.rows_in += 1
        row = {
            "image_id": vg_image_id(entry.image_id),
            "source": "vg",
            "source_image_id": str(entry.image_id),
            "width": entry.width,
            "height": entry.height,
            "url": entry.url,
            "file_path": vg_file_path(entry.image_id, entry.url),
            "group_id": None,
            "is_clean": None,
        }
        self._images.append(((pos,), row))

    # -- per-image records -------------------------------------------------------------------
    def _container(self, file: str, index: int, record: Any, keys: tuple[str, ...]) -> tuple[int, ImageEntry | str, dict] | None:
        """Check a per-image record; reject it whole (one item) when it cannot be split."""
        source = f"{file}#[{index}]"
        if not isinstance(record, dict):
            self._reject("record_malformed", source, record)
            return None
        image_id = record_image_id(record)
        if image_id is None:
            self._reject("record_missing_image_id", source, record)
            return None
        if not any(isinstance(record.get(k), list) for k in keys) or any(
            k in record and not isinstance(record[k], list) for k in keys
        ):
            self._reject("record_malformed", source, record)
            return None
        return image_id, self.index.status(image_id), record

    def add_primary(self, file: str, index: int, record: Any) -> None:
        """A record of objects.json (``objects``) or scene_graphs.json (``objects`` + ``relationships``)."""
        checked = self._container(file, index, record, ("objects",))
        if checked is None:
            return
        image_id, status, record = checked
        for j, obj in enumerate(record["objects"]):
            self._add_object(file, f"{file}#[{index}].objects[{j}]", image_id, status, obj)
        relations = record.get("relationships")
        if isinstance(relations, list):
            self._add_relations(file, index, image_id, status, relations)
        elif relations is not None:
            self._reject("record_malformed", f"{file}#[{index}].relationships", relations)

    def _embedded_values(self, source: str, obj: Any) -> list[tuple[str, Any]]:
        """The attribute values an object-like dict carries; a non-list ``attributes`` is one rejected item."""
        values = obj.get("attributes") if isinstance(obj, dict) else None
        if values is None:
            return []
        if not isinstance(values, list):
            self._reject("attribute_entry_malformed", f"{source}.attributes", values)
            return []
        return [(f"{source}.attributes[{k}]", v) for k, v in enumerate(values)]

    def _add_object(self, file: str, source: str, image_id: int, status: ImageEntry | str, obj: Any) -> None:
        values = self._embedded_values(source, obj)
        parsed = status if isinstance(status, str) else parse_object(obj, status)
        if isinstance(parsed, str):
            self._reject(parsed, source, obj)
            self._reject_each(status if isinstance(status, str) else "attribute_object_rejected", values)
            return
        objects = self._per_image.setdefault(image_id, _ImageObjects())
        if parsed.object_id in objects.labels:
            self._reject("duplicate_object_id", source, obj)
            self._reject_each("attribute_object_rejected", values)
            return
        self._keep_object(image_id, parsed, objects)
        for value_source, value in values:
            self._add_attribute_value(value_source, image_id, parsed.object_id, value)

    def _keep_object(self, image_id: int, parsed: ObjectEntry, objects: _ImageObjects) -> None:
        self.rows_in += 1
        self.boxes_clipped += parsed.clipped
        objects.labels[parsed.object_id] = parsed.names[0]
        objects.aliases.pop(parsed.object_id, None)
        for merged in parsed.merged_ids:
            if merged not in objects.labels:
                objects.aliases.setdefault(merged, parsed.object_id)
        x, y, w, h = parsed.box
        row = {
            "object_id": f"{vg_image_id(image_id)}/o{parsed.object_id}",
            "image_id": vg_image_id(image_id),
            "label": parsed.names[0],
            "names": parsed.names,
            "synset": parsed.synsets[0] if parsed.synsets else None,
            "synsets": parsed.synsets,
            "x": x,
            "y": y,
            "w": w,
            "h": h,
            "mask": None,
            "score": None,
            "origin": ORIGIN,
            "commons_category": None,
        }
        self._objects.append(((self._pos(image_id), parsed.object_id), row))

    # -- attributes --------------------------------------------------------------------------
    def add_attributes(self, file: str, index: int, record: Any) -> None:
        """A record of attributes.json: ``attributes`` (or ``objects``) list of objects with attribute lists."""
        checked = self._container(file, index, record, ("attributes", "objects"))
        if checked is None:
            return
        image_id, status, record = checked
        key = "attributes" if isinstance(record.get("attributes"), list) else "objects"
        for j, entry in enumerate(record[key]):
            source = f"{file}#[{index}].{key}[{j}]"
            if not isinstance(entry, dict):
                self._reject("attribute_entry_malformed", source, entry)
                continue
            values = self._embedded_values(source, entry)
            if isinstance(status, str):
                self._reject_each(status, values)
                continue
            object_id = object_id_of(entry)
            objects = self._per_image.get(image_id)
            resolved = objects.resolve(object_id) if objects is not None and object_id is not None else None
            if resolved is None:
                reason = "attribute_entry_malformed" if object_id is None else "attribute_object_unknown"
                self._reject_each(reason, values)
                continue
            for value_source, value in values:
                self._add_attribute_value(value_source, image_id, resolved, value)

    def _add_attribute_value(self, source: str, image_id: int, object_id: int, value: Any) -> None:
        attribute = normalize_label(value)
        if attribute is None:
            self._reject("attribute_empty" if isinstance(value, str) else "attribute_malformed", source, value)
            return
        objects = self._per_image[image_id]
        if (object_id, attribute) in objects.attributes:
            self._reject("duplicate_attribute", source, value)
            return
        objects.attributes.add((object_id, attribute))
        self.rows_in += 1
        row = {"object_id": f"{vg_image_id(image_id)}/o{object_id}", "image_id": vg_image_id(image_id), "attribute": attribute}
        self._attributes.append(((self._pos(image_id), object_id, attribute), row))

    # -- relationships -----------------------------------------------------------------------
    def add_relationships(self, file: str, index: int, record: Any) -> None:
        """A record of relationships.json."""
        checked = self._container(file, index, record, ("relationships",))
        if checked is None:
            return
        image_id, status, record = checked
        self._add_relations(file, index, image_id, status, record["relationships"])

    def _add_relations(self, file: str, index: int, image_id: int, status: ImageEntry | str, relations: list) -> None:
        objects = self._per_image.get(image_id, _ImageObjects())
        for k, raw in enumerate(relations):
            source = f"{file}#[{index}].relationships[{k}]"
            parsed = status if isinstance(status, str) else parse_relation(raw)
            if isinstance(parsed, str):
                self._reject(parsed, source, raw)
                continue
            subject, obj = objects.resolve(parsed.subject_id), objects.resolve(parsed.object_id)
            if subject is None or obj is None:
                self._reject("relation_endpoint_unknown", source, raw)
                continue
            if parsed.relationship_id in objects.relation_ids:
                self._reject("duplicate_relation_id", source, raw)
                continue
            triple = (subject, parsed.predicate, obj)
            if triple in objects.triples:
                self._reject("duplicate_relation", source, raw)
                continue
            objects.relation_ids.add(parsed.relationship_id)
            objects.triples.add(triple)
            self.rows_in += 1
            vid = vg_image_id(image_id)
            row = {
                "relation_id": f"{vid}/r{parsed.relationship_id}",
                "image_id": vid,
                "subject_id": f"{vid}/o{subject}",
                "object_id": f"{vid}/o{obj}",
                "predicate": parsed.predicate,
                "subject_label": parsed.subject_name or objects.labels[subject],
                "object_label": parsed.object_name or objects.labels[obj],
                "synset": parsed.synset,
            }
            self._relations.append(((self._pos(image_id), parsed.relationship_id), row))

    # -- file-level failures -----------------------------------------------------------------
    def add_failure(self, failure: StreamFailure) -> None:
        """A file that stopped parsing: one reject naming the file, record index and byte range."""
        self._reject(failure.reason, failure.location, failure.message)

    # -- result ------------------------------------------------------------------------------
    def result(self) -> StageResult:
        outputs = {
            "images": _table(self._images, schemas.IMAGES),
            "objects": _table(self._objects, schemas.OBJECTS),
            "relations": _table(self._relations, schemas.RELATIONS),
            "attributes": _table(self._attributes, schemas.ATTRIBUTES),
        }
        extra = {**self.extra, "boxes_clipped": self.boxes_clipped, "tables": {k: t.num_rows for k, t in outputs.items()}}
        return StageResult(outputs=outputs, rejects=self.rejects, rows_in=self.rows_in, extra=extra)


def _table(keyed_rows: list[tuple[tuple, dict]], schema: pa.Schema) -> pa.Table:
    keyed_rows.sort(key=lambda item: item[0])
    return schemas.from_rows([row for _, row in keyed_rows], schema)
