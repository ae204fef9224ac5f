"""SA-1B fast path: many images' annotation JSON parsed by Arrow at once, checked column-wise.

The per-image path (``sa1b._TarReader._image``) parses each JSON into Python objects and builds
region columns from them. Here a batch of JSON files is parsed by ``pyarrow.json`` straight into
columns, and an image takes this path only when the result is certain to be the per-image
path's: the batch has exactly the released layout (image {image_id, width, height, file_name},
annotations of the eight released keys, numbers where numbers are expected), and every
annotation of the image is valid, has no null, and covers its stated area. Anything else (a
batch Arrow refuses or types differently, an image with one odd value) goes to the per-image
path, which gives the reject and its reason. Values agree: Arrow and Python both parse JSON
numbers to the nearest double, and id/size/width/height must be 64-bit integers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from reasonvqa import masks, schemas
from reasonvqa.tasks.sources.region_columns import encode_struct, mask_column

_NUMBER = (pa.int64(), pa.float64())
_ANNOTATION_KEYS = {"id", "bbox", "area", "segmentation", "predicted_iou", "stability_score", "point_coords", "crop_box"}
_EXACT = 2.0**53  # crop_box / point_coords values beyond this may have been integers a double cannot hold


BLOCK_BYTES = 32 << 20  # room for one batch's JSON files in a JsonBlock (pages are only touched when written)
_NOT_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*[^ \t\n\r\x0b\x0c]")  # what bytes.strip() would not empty


class JsonBlock:
    """JSON files read back to back into one buffer, each followed by a newline: the bytes ``parse`` would
    join them into, so Arrow reads a batch in place instead of a joined copy."""

    def __init__(self) -> None:
        self.data = np.empty(BLOCK_BYTES, dtype=np.uint8)  # not zero-filled: memory is only taken where written
        self.view = memoryview(self.data)
        self.used = 0

    def read(self, stream, size: int) -> tuple[memoryview | bytes, int | None]:
        """The ``size`` bytes of ``stream``: a view into the block and where it starts there, or bytes and
        None when they do not fit."""
        start = self.used
        if start + size + 1 > len(self.data):
            return stream.read(size), None
        view = self.view[start:start + size]
        got = stream.readinto(view)
        if got != size:  # a short member: what read() would have given, and the block's bytes stay unused
            return bytes(view[:got]), None
        self.data[start + size] = 10  # b"\n"
        self.used = start + size + 1
        return view, start

    def joined(self, docs: list, starts: list) -> memoryview | None:
        """``b"\n".join(docs) + b"\n"`` as a view of the block when ``docs`` lie in it back to back, else None.

        ``starts`` are ``(block, start)`` pairs as ``read`` placed each doc (None for a doc read as bytes)."""
        if not docs:
            return None
        first = expected = starts[0][1] if starts[0] is not None else -1
        for doc, at in zip(docs, starts):
            if at is None or at[0] is not self or at[1] != expected:
                return None
            expected += len(doc) + 1
        return self.view[first:expected]


@dataclass
class FastImage:
    """An image whose regions are ``regions[start:stop]`` of its batch's arrays."""

    image_id: int
    width: int
    height: int
    regions: dict[str, pa.Array]
    start: int
    stop: int
    json: bytes


def parse(docs: list, joined: memoryview | None = None) -> pa.Table | None:
    """The JSON files as one table (a row each), or None when Arrow refuses one or the layout is not the released one.

    ``joined``: the files already joined by newlines (``JsonBlock.joined``). A file of two objects is a row
    too many; a blank file (no row) could hide that, so it refuses the batch.
    """
    if not all(_NOT_BLANK.match(d) for d in docs):
        return None
    data = pa.py_buffer(b"\n".join(docs) + b"\n" if joined is None else joined)
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
                             parse_options=pj.ParseOptions(newlines_in_values=True))
        table.validate(full=True)  # a null inside a list of objects comes back as an invalid array (pyarrow 26)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):  # UnicodeDecodeError is a ValueError
        return None
    return table if table.num_rows == len(docs) and _released_layout(table.schema) else None


def _released_layout(schema: pa.Schema) -> bool:
    if set(schema.names) != {"image", "annotations"}:
        return False
    image, annotations = schema.field("image").type, schema.field("annotations").type
    if not pa.types.is_struct(image) or {f.name: f.type for f in image} != {
            "image_id": pa.int64(), "width": pa.int64(), "height": pa.int64(), "file_name": pa.string()}:
        return False
    if not pa.types.is_list(annotations) or not pa.types.is_struct(annotations.value_type):
        return False
    fields = {f.name: f.type for f in annotations.value_type}
    if set(fields) != _ANNOTATION_KEYS or fields["id"] != pa.int64():
        return False
    segmentation = fields["segmentation"]
    if not pa.types.is_struct(segmentation) or {f.name: f.type for f in segmentation} != {
            "size": pa.list_(pa.int64()), "counts": pa.string()}:
        return False
    return (fields["area"] in _NUMBER and fields["predicted_iou"] in _NUMBER and fields["stability_score"] in _NUMBER
            and fields["bbox"] in [pa.list_(t) for t in _NUMBER] and fields["crop_box"] in [pa.list_(t) for t in _NUMBER]
            and fields["point_coords"] in [pa.list_(pa.list_(t)) for t in _NUMBER])


def fast_images(table: pa.Table, docs: list[bytes], stems: list[str], jpeg_sizes: list[tuple[int, int]],
                verify_area: bool) -> list[FastImage | None]:
    """Per row of ``parse``'s table: its regions when the image may take the fast path, else None."""
    n_docs = table.num_rows
    image = table.column("image").combine_chunks()
    annotations = table.column("annotations").combine_chunks()
    ids, widths, heights = (_ints(image.field(k)) for k in ("image_id", "width", "height"))
    names = image.field("file_name")
    ok = np.asarray(image.is_valid()) & np.asarray(annotations.is_valid())
    for column in (image.field("image_id"), image.field("width"), image.field("height"), names):
        ok &= np.asarray(column.is_valid())
    ok &= (ids > 0) & (widths > 0) & (heights > 0)
    ok &= ids == np.array([int(s) for s in stems], dtype=np.int64)
    ok &= np.array([n == f"sa_{s}.jpg" for n, s in zip(names.to_pylist(), stems)], dtype=bool)
    ok &= (widths == np.array([w for w, _ in jpeg_sizes])) & (heights == np.array([h for _, h in jpeg_sizes]))

    offsets = np.asarray(annotations.offsets)
    start0 = offsets[0]
    lengths = np.diff(offsets)
    ann = annotations.values[start0:offsets[-1]]
    doc_of = np.repeat(np.arange(n_docs), lengths)
    good, columns = _annotation_checks(ann, heights[doc_of], widths[doc_of], doc_of, n_docs)
    ok &= np.bincount(doc_of, weights=~good, minlength=n_docs) == 0
    keep = ok[doc_of]
    if verify_area and keep.any():
        at = np.flatnonzero(keep)
        sizes = [[h, w] for h, w in zip(heights.tolist(), widths.tolist())]  # one list per image, shared by its masks
        counts = _taken(columns["counts"], at).cast(pa.binary()).to_pylist()  # the UTF-8 bytes pycocotools encodes a str to
        covered = masks.coco_areas([{"size": sizes[d], "counts": c} for d, c in zip(doc_of[at].tolist(), counts)])
        wrong = np.zeros(len(doc_of), dtype=bool)
        wrong[at] = covered != columns["area"][at]
        ok &= np.bincount(doc_of, weights=wrong, minlength=n_docs) == 0
        keep = ok[doc_of]
    regions = _region_arrays(columns, ids, doc_of, heights[doc_of], widths[doc_of], keep)
    first = np.concatenate([[0], np.cumsum(lengths * ok)])
    return [FastImage(int(ids[i]), int(widths[i]), int(heights[i]), regions, int(first[i]), int(first[i + 1]), docs[i])
            if ok[i] else None for i in range(n_docs)]


def _ints(array: pa.Array) -> np.ndarray:
    return np.asarray(array.fill_null(0), dtype=np.int64)


def _annotation_checks(ann: pa.StructArray, height: np.ndarray, width: np.ndarray, doc_of: np.ndarray,
                       n_docs: int) -> tuple[np.ndarray, dict]:
    """Per annotation: True when the per-image path would keep it as is; and its columns."""
    good = np.asarray(ann.is_valid())
    field = {k: ann.field(k) for k in _ANNOTATION_KEYS}
    for column in field.values():
        good &= np.asarray(column.is_valid())
    segmentation = field["segmentation"]
    size, counts = segmentation.field("size"), segmentation.field("counts")
    good &= np.asarray(size.is_valid()) & np.asarray(counts.is_valid())
    good &= np.asarray(pc.fill_null(pc.binary_length(counts), 0)) > 0
    sizes = _fixed(size, 2, good)
    good &= (sizes[:, 0] == height) & (sizes[:, 1] == width)
    boxes = _fixed(field["bbox"], 4, good)
    good &= np.isfinite(boxes).all(axis=1) & (boxes[:, 2] > 0) & (boxes[:, 3] > 0)
    area = np.asarray(field["area"].cast(pa.float64()).fill_null(0.0), dtype=np.float64)
    good &= np.isfinite(area) & (area > 0)
    for name in ("crop_box", "point_coords"):
        good &= _finite_values(field[name], len(good))
    ids = np.asarray(field["id"].fill_null(0), dtype=np.int64)
    order = np.lexsort((ids, doc_of))
    repeated = (ids[order][1:] == ids[order][:-1]) & (doc_of[order][1:] == doc_of[order][:-1])
    clashing_docs = np.zeros(n_docs, dtype=bool)
    clashing_docs[doc_of[order][1:][repeated]] = True  # the per-image path rejects the repeats
    good &= ~clashing_docs[doc_of]
    scores = {k: np.asarray(field[k].cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
              for k in ("predicted_iou", "stability_score")}
    return good, {"ids": ids, "boxes": boxes, "area": area, "counts": counts, **scores,
                  "crop_box": field["crop_box"], "point_coords": field["point_coords"]}


def _fixed(lists: pa.ListArray, width: int, good: np.ndarray) -> np.ndarray:
    """``lists`` as an (n, width) float array; rows of another length, or with a null, are marked not good."""
    lengths = np.asarray(pc.fill_null(pc.list_value_length(lists), -1))
    good &= lengths == width
    out = np.full((len(lists), width), np.nan)
    rows = np.flatnonzero(lengths == width)
    if len(rows):
        values = pc.list_flatten(_taken(lists, rows))
        good[rows] &= np.asarray(pc.fill_null(pc.is_valid(values), False)).reshape(-1, width).all(axis=1)
        out[rows] = np.asarray(values.cast(pa.float64()).fill_null(np.nan), dtype=np.float64).reshape(-1, width)
    return out


def _finite_values(lists: pa.ListArray, n: int) -> np.ndarray:
    """Per row: the (nested) list has no null at any depth and every number is finite and below 2**53."""
    ok = np.asarray(lists.is_valid())
    parent = np.arange(n)
    column: pa.Array = lists
    while pa.types.is_list(column.type):
        offsets = np.asarray(column.offsets)
        parent = np.repeat(parent, np.diff(offsets))
        column = column.values[offsets[0]:offsets[-1]]
        bad = ~np.asarray(column.is_valid())
        if pa.types.is_list(column.type):
            ok &= np.bincount(parent, weights=bad, minlength=n) == 0
    values = np.asarray(column.cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
    bad = ~(np.abs(values) < _EXACT)  # NaN and infinities fail too
    return ok & (np.bincount(parent, weights=bad, minlength=n) == 0)


def _region_arrays(columns: dict, image_ids: np.ndarray, doc_of: np.ndarray, heights: np.ndarray,
                   widths: np.ndarray, keep: np.ndarray) -> dict[str, pa.Array]:
    """The region columns of the kept annotations (REGIONS types; ``extra`` as its two field arrays);
    ``image_ids`` per image, ``doc_of`` the image of each annotation."""
    at = np.flatnonzero(keep)
    ids = pa.array(columns["ids"][keep])
    prefix = _taken(pa.array([f"sa1b:{i}" for i in image_ids.tolist()], type=pa.string()), doc_of[keep], all_rows=False)
    boxes = columns["boxes"][keep]
    return {
        "region_id": pc.binary_join_element_wise(prefix, pc.cast(ids, pa.string()), "/g"),
        "image_id": prefix,
        "x": pa.array(boxes[:, 0]), "y": pa.array(boxes[:, 1]), "w": pa.array(boxes[:, 2]), "h": pa.array(boxes[:, 3]),
        "heights": pa.array(heights[keep].astype(np.int32)), "widths": pa.array(widths[keep].astype(np.int32)),
        "counts": _taken(columns["counts"], at), "area": pa.array(columns["area"][keep]),
        "predicted_iou": pa.array(_finite(columns["predicted_iou"][keep]), type=pa.float32(), from_pandas=True),
        "stability_score": pa.array(_finite(columns["stability_score"][keep]), type=pa.float32(), from_pandas=True),
        "crop_box": _taken(columns["crop_box"], at), "point_coords": _taken(columns["point_coords"], at),
    }


def _taken(array: pa.Array, rows: np.ndarray, all_rows: bool = True) -> pa.Array:
    """``array.take(rows)``; ``array`` itself when ``rows`` is every row in order (``all_rows``: no copy)."""
    if all_rows and len(rows) == len(array):
        return array
    return array.take(pa.array(rows))


def _finite(values: np.ndarray) -> np.ndarray:
    values = values.copy()
    values[~np.isfinite(values)] = np.nan
    return values.astype(np.float32)


def regions_table(parts: list[tuple[dict[str, pa.Array], int, int, bytes]], origin: str) -> pa.Table | None:
    """The REGIONS table of fast images' regions (regions, first, end, JSON of each image), in order; None
    when their ``extra`` may differ from the per-image path's (see ``_same_extra_type``)."""
    runs: list[list] = []  # consecutive images of one batch: one slice
    for regions, start, stop, _ in parts:
        if runs and runs[-1][0] is regions and runs[-1][2] == start:
            runs[-1][2] = stop
        else:
            runs.append([regions, start, stop])

    def cat(name: str) -> pa.Array:
        chunks = [regions[name].slice(start, stop - start) for regions, start, stop in runs]
        types = {c.type for c in chunks}
        if len(types) > 1:  # one batch parsed integers, another floats: all become floats, as pa.array would do
            wide = next(t for t in types if "double" in str(t))
            chunks = [c.cast(wide) for c in chunks]
        return pa.concat_arrays(chunks)

    n = sum(stop - start for _, start, stop, _ in parts)
    if not (_same_extra_type(parts, "crop_box") and _same_extra_type(parts, "point_coords")):
        return None
    extra = encode_struct({"crop_box": cat("crop_box"), "point_coords": cat("point_coords")})
    if extra is None:
        return None
    columns = {name: cat(name) for name in ("region_id", "image_id", "x", "y", "w", "h", "area",
                                            "predicted_iou", "stability_score")}
    columns["mask"] = mask_column(cat("heights"), cat("widths"), cat("counts"))
    columns["origin"] = pa.repeat(pa.scalar(origin, pa.string()), n)
    columns["extra"] = extra
    arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schemas.REGIONS]
    return pa.Table.from_arrays(arrays, schema=schemas.REGIONS)


def _same_extra_type(parts: list[tuple[dict[str, pa.Array], int, int, bytes]], name: str) -> bool:
    """True when ``name``'s values get the Arrow type here that the per-image path's encoder gives them.

    That path (region_columns._to_arrow) takes floats when a sampled row (every ``n // 64``-th) holds a
    float, else infers over every row. Arrow typed each batch by all of its rows. This check accepts
    the two cases that are provably the same: all integer batches, or a sampled row whose JSON text has
    a float (checked in the text itself). It was written when the per-image path typed by the sample
    alone; since that path infers over every row otherwise, a False here is conservative (the shard is
    rebuilt through the per-image path, with the same bytes), not a difference.
    """
    if all(pa.types.is_integer(_leaf_type(regions[name].type)) for regions, *_ in parts):
        return True
    ends = np.cumsum([stop - start for _, start, stop, _ in parts])
    texts: dict[int, bytes] = {}  # a doc may be a view into the block: copied once, when first sampled
    for row in range(0, int(ends[-1]), max(1, int(ends[-1]) // 64)):
        part = int(np.searchsorted(ends, row, side="right"))
        _, start, stop, doc = parts[part]
        if part not in texts:
            texts[part] = bytes(doc)
        text = _value_text(texts[part], name, row - int(ends[part]) + (stop - start), stop - start)
        if text is None:
            return False
        if any(c in text for c in b".eE"):
            return True
    return False


def _leaf_type(t: pa.DataType) -> pa.DataType:
    while pa.types.is_list(t):
        t = t.value_type
    return t


def _value_text(doc: bytes, key: str, index: int, count: int) -> bytes | None:
    """The JSON text of key ``key``'s value in the ``index``-th of the ``count`` annotations, or None when the
    key is not written ``count`` times as is (e.g. with escapes). Keys appear only as keys here: the layout
    is the released one, and a quote inside a string value is escaped."""
    found = [m.end() for m in re.finditer(rb'"' + key.encode() + rb'"\s*:', doc)]
    if len(found) != count:
        return None
    start = doc.index(b"[", found[index])
    depth = 0
    for end in range(start, len(doc)):
        depth += {91: 1, 93: -1}.get(doc[end], 0)  # [ and ]
        if depth == 0:
            return doc[start:end + 1]
    return None
