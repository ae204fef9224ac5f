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
from typing import Any, Iterable

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.jsonstream import StreamFailure
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.sources.columns import ColumnBuffer
from reasonvqa.tasks.sources.normalize import normalize_label
from reasonvqa.tasks.sources.vg_records import (
    ImageEntry,
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


def build_image_index(rows: Iterable[Any]) -> ImageIndex:
    """Parse image_data.json rows one by one; the first row of a repeated id owns its position."""
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


_INT = pa.int64()


class VgShardBuilder:
    """Collects one shard's rows and rejects; ``result()`` returns the sorted StageResult."""

    def __init__(self, shard: int, index: ImageIndex, extra: dict[str, Any] | None = None) -> None:
        self.shard = shard
        self.index = index
        self.rejects = Rejects(STAGE, shard)
        self.rows_in = 0
        self.extra = dict(extra or {})
        self.boxes_clipped = 0
        self._images = ColumnBuffer(schemas.IMAGES, ("image_id", "source_image_id", "width", "height", "url", "file_path"),
                                    [("_pos", _INT)], {"source": "vg"})
        self._objects = ColumnBuffer(schemas.OBJECTS, ("object_id", "image_id", "label", "names", "synset", "synsets", "x", "y", "w", "h"),
                                     [("_pos", _INT), ("_oid", _INT)], {"origin": ORIGIN})
        self._relations = ColumnBuffer(schemas.RELATIONS, tuple(schemas.RELATIONS.names), [("_pos", _INT), ("_rid", _INT)])
        self._attributes = ColumnBuffer(schemas.ATTRIBUTES, tuple(schemas.ATTRIBUTES.names),
                                        [("_pos", _INT), ("_oid", _INT), ("_attribute", pa.string())])
        self._per_image: dict[int, _ImageObjects] = {}

    # -- helpers -----------------------------------------------------------------------------
    def _reject(self, reason: str, source: str, record: Any) -> None:
        self.rows_in += 1
        self.rejects.add(reason, source, record)

    def _reject_each(self, reason: str, items: list[tuple[str, Any]]) -> None:
        for source, record in items:
            self._reject(reason, source, record)

    def _embedded_values(self, source: str, obj: Any) -> list[tuple[str, Any]]:
        """The attribute values an object-like dict carries; a non-list ``attributes`` is one rejected item."""
        values = obj.get("attributes") if type(obj) is dict else None
        if values is None:
            return []
        if not isinstance(values, list):
            self._reject("attribute_entry_malformed", f"{source}.attributes", values)
            return []
        return [(f"{source}.attributes[{k}]", v) for k, v in enumerate(values)]

    # -- image_data.json ---------------------------------------------------------------------
    def add_image_row(self, pos: int) -> None:
        """The image_data.json row at ``pos`` (already parsed in the index)."""
        entry = self.index.entries[pos]
        if not isinstance(entry, ImageEntry):
            self._reject(entry, f"image_data.json#[{pos}]", self.index.rejected_raw[pos])
            return
        self.rows_in += 1
        iid = entry.image_id
        self._images.add((pos, vg_image_id(iid), str(iid), entry.width, entry.height, entry.url, vg_file_path(iid, entry.url)))

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
        if isinstance(status, str):
            for j, obj in enumerate(record["objects"]):
                source = f"{file}#[{index}].objects[{j}]"
                values = self._embedded_values(source, obj)
                self._reject(status, source, obj)
                self._reject_each(status, values)
        else:
            self._add_objects(file, index, image_id, status, record["objects"])
        relations = record.get("relationships")
        if isinstance(relations, list):
            self._add_relations(file, index, image_id, status, relations)
        elif relations is not None:
            self._reject("record_malformed", f"{file}#[{index}].relationships", relations)

    def _add_objects(self, file: str, index: int, image_id: int, image: ImageEntry, objects: list) -> None:
        registry = self._per_image.setdefault(image_id, _ImageObjects())
        vid, pos = vg_image_id(image_id), self.index.position[image_id]
        kept: list[tuple] = []
        add = kept.append
        for j, obj in enumerate(objects):
            parsed = parse_object(obj, image)
            duplicate = not isinstance(parsed, str) and parsed.object_id in registry.labels
            has_values = type(obj) is dict and obj.get("attributes") is not None
            if isinstance(parsed, str) or duplicate or has_values:
                source = f"{file}#[{index}].objects[{j}]"
                values = self._embedded_values(source, obj)
                if isinstance(parsed, str) or duplicate:
                    self._reject(parsed if isinstance(parsed, str) else "duplicate_object_id", source, obj)
                    self._reject_each("attribute_object_rejected", values)
                    continue
            else:
                values = []
            self.rows_in += 1
            self.boxes_clipped += parsed.clipped
            oid = parsed.object_id
            registry.labels[oid] = parsed.names[0]
            if parsed.merged_ids:
                registry.aliases.pop(oid, None)
                for merged in parsed.merged_ids:
                    if merged not in registry.labels:
                        registry.aliases.setdefault(merged, oid)
            synsets = parsed.synsets
            x, y, w, h = parsed.box
            add((pos, oid, f"{vid}/o{oid}", vid, parsed.names[0], parsed.names, synsets[0] if synsets else None, synsets, x, y, w, h))
            for value_source, value in values:
                self._add_attribute_value(value_source, image_id, oid, value)
        self._objects.add_many(kept)

    # -- attributes --------------------------------------------------------------------------
    def add_attributes(self, file: str, index: int, record: Any) -> None:
        """A record of attributes.json: ``attributes`` (or ``objects``) list of objects with attribute lists."""
        checked = self._container(file, index, record, ("attributes", "objects"))
        if checked is None:
            return
        image_id, status, record = checked
        key = "attributes" if isinstance(record.get("attributes"), list) else "objects"
        registry = self._per_image.get(image_id)
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
            resolved = registry.resolve(object_id) if registry is not None and object_id is not None else None
            if resolved is None:
                self._reject_each("attribute_entry_malformed" if object_id is None else "attribute_object_unknown", values)
                continue
            for value_source, value in values:
                self._add_attribute_value(value_source, image_id, resolved, value)

    def _add_attribute_value(self, source: str, image_id: int, object_id: int, value: Any) -> None:
        attribute = normalize_label(value)
        if attribute is None:
            self._reject("attribute_empty" if isinstance(value, str) else "attribute_malformed", source, value)
            return
        registry = self._per_image[image_id]
        if (object_id, attribute) in registry.attributes:
            self._reject("duplicate_attribute", source, value)
            return
        registry.attributes.add((object_id, attribute))
        self.rows_in += 1
        vid = vg_image_id(image_id)
        self._attributes.add((self.index.position[image_id], object_id, attribute, f"{vid}/o{object_id}", vid, attribute))

    # -- relationships -----------------------------------------------------------------------
    def add_relationships(self, file: str, index: int, record: Any) -> None:
        """A record of relationships.json."""
        checked = self._container(file, index, record, ("relationships",))
        if checked is None:
            return
        image_id, status, record = checked
        self._add_relations(file, index, image_id, status, record["relationships"])

    def _add_relations(self, file: str, index: int, image_id: int, status: ImageEntry | str, relations: list) -> None:
        registry = self._per_image.get(image_id, _ImageObjects())
        vid = vg_image_id(image_id)
        for k, raw in enumerate(relations):
            parsed = status if isinstance(status, str) else parse_relation(raw)
            reason = parsed if isinstance(parsed, str) else None
            if not isinstance(parsed, str):
                subject, obj = registry.resolve(parsed.subject_id), registry.resolve(parsed.object_id)
                if subject is None or obj is None:
                    reason = "relation_endpoint_unknown"
                elif parsed.relationship_id in registry.relation_ids:
                    reason = "duplicate_relation_id"
                elif (subject, parsed.predicate, obj) in registry.triples:
                    reason = "duplicate_relation"
            if reason is not None:
                self._reject(reason, f"{file}#[{index}].relationships[{k}]", raw)
                continue
            assert not isinstance(parsed, str) and subject is not None and obj is not None  # reason is None
            registry.relation_ids.add(parsed.relationship_id)
            registry.triples.add((subject, parsed.predicate, obj))
            self.rows_in += 1
            rid = parsed.relationship_id
            self._relations.add((
                self.index.position[image_id], rid, f"{vid}/r{rid}", vid, f"{vid}/o{subject}", f"{vid}/o{obj}", parsed.predicate,
                parsed.subject_name or registry.labels[subject], parsed.object_name or registry.labels[obj], parsed.synset,
            ))

    # -- file-level failures -----------------------------------------------------------------
    def add_failure(self, failure: StreamFailure) -> None:
        """A file that stopped parsing: one reject naming the file, record index and byte range."""
        self._reject(failure.reason, failure.location, failure.message)

    # -- result ------------------------------------------------------------------------------
    def result(self) -> StageResult:
        outputs = {
            "images": self._images.table(),
            "objects": self._objects.table(),
            "relations": self._relations.table(),
            "attributes": self._attributes.table(),
        }
        extra = {**self.extra, "boxes_clipped": self.boxes_clipped, "tables": {k: t.num_rows for k, t in outputs.items()}}
        return StageResult(outputs=outputs, rejects=self.rejects, rows_in=self.rows_in, extra=extra)
