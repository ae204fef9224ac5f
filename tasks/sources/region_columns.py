"""Collect region rows column by column and turn them into one REGIONS table.

SA-1B images carry ~100 regions each; keeping them as per-row dicts would cost several
hundred bytes of Python objects per row. Columns of plain values become Arrow arrays once
per shard; the COCO RLE counts strings are kept as they came (compressed). ``extra`` values may
be given as dicts: they are encoded to sorted-key JSON once per shard (see ``json_objects``).
Numeric columns may also be given as numpy arrays, which stay arrays until the table is built.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import schemas


class RegionColumns:
    """Append regions in output order; ``table()`` gives them as a ``schemas.REGIONS`` table."""

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in schemas.REGIONS.names if name != "mask"}
        self.pieces: dict[str, list[np.ndarray]] = {name: [] for name in _NUMERIC}  # a column given only as arrays
        self.mask_heights: list[int | None] = []
        self.mask_widths: list[int | None] = []
        self.mask_counts: list[str | None] = []
        self.extra_parts: list[tuple[int, dict[str, list]]] = []  # (first row, per-row field values)

    def __len__(self) -> int:
        return len(self.columns["region_id"])

    def _values(self, name: str) -> list:
        """Column ``name`` as a list, its array pieces (if any) converted: the caller adds list values."""
        pieces = self.pieces.get(name)
        if pieces:
            self.columns[name][:0] = np.concatenate(pieces).tolist()
            pieces.clear()
        return self.columns[name]

    def add(self, *, region_id: str, image_id: str, label: str | None, box: tuple[float, float, float, float],
            area: float, origin: str, mask: tuple[int, int, str] | None = None, score: float | None = None,
            predicted_iou: float | None = None, stability_score: float | None = None, prompt: str | None = None,
            attributes: list[str] | None = None, visibility: str | None = None,
            center_3d: list[float] | None = None, extra: str | dict | None = None) -> None:
        """One region; ``mask`` is ``(height, width, counts)`` of a COCO compressed RLE."""
        x, y, w, h = box
        values = {"region_id": region_id, "image_id": image_id, "label": label, "x": x, "y": y, "w": w, "h": h,
                  "area": area, "score": score, "predicted_iou": predicted_iou, "stability_score": stability_score,
                  "origin": origin, "prompt": prompt, "attributes": attributes, "visibility": visibility,
                  "center_3d": center_3d, "extra": extra}
        for name, value in values.items():
            self._values(name).append(value)
        height, width, counts = mask if mask is not None else (None, None, None)
        self.mask_heights.append(height)
        self.mask_widths.append(width)
        self.mask_counts.append(counts)

    def extend(self, count: int, *, masks: tuple[list[int], list[int], list[str]] | None = None,
               extra_fields: dict[str, list] | None = None, **columns: object) -> None:
        """``count`` regions at once: each column a list of ``count`` values or one value for all.

        ``masks`` is ``(heights, widths, counts)``; ``extra_fields`` (instead of ``extra``) gives the
        ``extra`` JSON object's fields as one list of ``count`` values per key, encoded per shard
        without building a dict per row. A numeric column may be a numpy array (NaN is null).
        Columns not given are null.
        """
        for name, given in columns.items():
            if isinstance(given, np.ndarray) and (name not in self.pieces or len(given) != count):
                raise TypeError(f"region column {name!r} cannot be an array of {len(given)} for {count} rows")
        if extra_fields is not None:
            self.extra_parts.append((len(self), extra_fields))
        for name in self.columns:
            given = columns.pop(name, None)
            if isinstance(given, np.ndarray):
                if self.columns[name]:
                    self.columns[name].extend(given.tolist())
                else:
                    self.pieces[name].append(given)
                continue
            self._values(name).extend(given if isinstance(given, list) else [given] * count)
        if columns:
            raise TypeError(f"unknown region columns {sorted(columns)}")
        heights, widths, counts = masks if masks is not None else ([None] * count,) * 3
        self.mask_heights.extend(heights)
        self.mask_widths.extend(widths)
        self.mask_counts.extend(counts)

    def table(self) -> pa.Table:
        """The collected regions as a REGIONS table, in the order they were added."""
        arrays = []
        for field in schemas.REGIONS:
            if field.name == "mask":
                arrays.append(self._masks())
            elif field.name == "extra":
                arrays.append(self._extra_array(field.type))
            elif self.pieces.get(field.name):  # from_pandas: a float NaN becomes null
                values = np.concatenate(self.pieces[field.name]).astype(field.type.to_pandas_dtype(), copy=False)
                arrays.append(pa.array(values, type=field.type, from_pandas=True))
            else:
                arrays.append(pa.array(self.columns[field.name], type=field.type, from_pandas=True))
        return pa.Table.from_arrays(arrays, schema=schemas.REGIONS)

    def _extra_array(self, string: pa.DataType) -> pa.Array:
        """The ``extra`` column; when one key set's field parts cover every row (SA-1B), it stays in Arrow."""
        parts = self.extra_parts
        if parts and len({tuple(sorted(fields)) for _, fields in parts}) == 1:
            keys = sorted(parts[0][1])
            merged = {k: list(chain.from_iterable(fields[k] for _, fields in parts)) for k in keys}
            if parts[0][0] == 0 and len(merged[keys[0]]) == len(self) and _contiguous(parts, keys[0]):
                encoded = _json_columns_arrow(merged)
                return pa.array(encoded, type=string) if isinstance(encoded, list) else encoded.cast(string)
        return pa.array(self._extra_texts(), type=string)

    def _extra_texts(self) -> list:
        """The ``extra`` column as text: dicts and field parts encoded, one encode per key set."""
        texts = _encode_dicts(self.columns["extra"])
        groups: dict[tuple[str, ...], list[tuple[int, dict[str, list]]]] = {}
        for start, fields in self.extra_parts:
            groups.setdefault(tuple(sorted(fields)), []).append((start, fields))
        for keys, parts in groups.items():
            merged = {k: list(chain.from_iterable(fields[k] for _, fields in parts)) for k in keys}
            encoded = json_columns(merged)
            offset = 0
            for start, fields in parts:
                n = len(fields[keys[0]])
                texts[start:start + n] = encoded[offset:offset + n]
                offset += n
        return texts

    def _masks(self) -> pa.Array:
        """The mask column: struct of size ``[h, w]`` and counts, null where a region has no mask."""
        if None not in self.mask_counts:  # every region has a mask (SA-1B): no per-row Python work
            return mask_column(pa.array(self.mask_heights, type=pa.int32()), pa.array(self.mask_widths, type=pa.int32()),
                               pa.array(self.mask_counts, type=pa.string()))
        no_mask = np.array([c is None for c in self.mask_counts], dtype=bool)
        n = len(no_mask)
        sizes = np.zeros((n, 2), dtype=np.int32)
        if n and not no_mask.all():
            # a mask gives its height, width and counts together: the sizes present are those of the masks
            sizes[~no_mask, 0] = [h for h in self.mask_heights if h is not None]
            sizes[~no_mask, 1] = [w for w in self.mask_widths if w is not None]
        return _mask_struct(sizes, pa.array(self.mask_counts, type=pa.string()), no_mask)


def mask_column(heights: pa.Array, widths: pa.Array, counts: pa.Array) -> pa.Array:
    """The REGIONS mask column of regions that all have a mask: sizes ``[h, w]`` (int32) and RLE counts."""
    n = len(counts)
    sizes = np.empty((n, 2), dtype=np.int32)
    sizes[:, 0] = np.asarray(heights)
    sizes[:, 1] = np.asarray(widths)
    return _mask_struct(sizes, counts, np.zeros(n, dtype=bool))


def _mask_struct(sizes: np.ndarray, counts: pa.Array, no_mask: np.ndarray) -> pa.Array:
    n = len(no_mask)
    size_array = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
                                          pa.array(sizes.reshape(-1)), mask=pa.array(no_mask))
    mask_type = schemas.REGIONS.field("mask").type
    return pa.StructArray.from_arrays([size_array.cast(mask_type.field("size").type), counts],
                                      fields=list(mask_type), mask=pa.array(no_mask))


_NUMERIC = ("x", "y", "w", "h", "area", "score", "predicted_iou", "stability_score")


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _encode_dicts(values: list) -> list:
    """``values`` with every dict replaced by its JSON text (strings and None kept)."""
    at = [i for i, v in enumerate(values) if isinstance(v, dict)]
    if not at:
        return values
    out = list(values)
    for i, text in zip(at, json_objects([values[i] for i in at])):
        out[i] = text
    return out


def _contiguous(parts: list[tuple[int, dict[str, list]]], key: str) -> bool:
    """True when each part starts where the one before ended."""
    end = 0
    for start, fields in parts:
        if start != end:
            return False
        end += len(fields[key])
    return True


def json_columns(fields: dict[str, list]) -> list[str]:
    """Compact sorted-key JSON of the objects whose i-th has ``{key: fields[key][i]}`` (see json_objects)."""
    encoded = _json_columns_arrow(fields)
    return encoded if isinstance(encoded, list) else encoded.to_pylist()


def _json_columns_arrow(fields: dict[str, list]) -> pa.Array | list[str]:
    """``json_columns`` as an Arrow array from the vectorized pass, or a list from the Python encoder."""
    names = sorted(fields)
    n = len(fields[names[0]])
    try:
        encoded = encode_struct({k: _to_arrow(fields[k]) for k in names})
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        encoded = None
    if encoded is None:
        return [_ENCODER.encode({k: fields[k][i] for k in names}) for i in range(n)]
    return encoded


def encode_struct(fields: dict[str, pa.Array]) -> pa.Array | None:
    """Compact sorted-key JSON (string array) of the objects whose fields are the given arrays, by polars;
    None when a value needs the Python encoder (see ``_plain``)."""
    names = sorted(fields)
    values = pa.StructArray.from_arrays([fields[k] for k in names], names=names)
    if not _plain(values, len(fields[names[0]])):
        return None
    return cast(pl.Series, pl.from_arrow(values)).struct.json_encode().to_arrow().cast(pa.string())


def json_objects(objects: list[dict]) -> list[str]:
    """Compact sorted-key JSON of each dict, as ``json.dumps(sort_keys=True, separators=(",", ":"))`` writes it.

    Dicts that share their keys and hold finite numbers, strings and lists of them are encoded
    in one vectorized pass (Arrow struct -> polars ``json_encode``, ~3x faster than a Python
    encoder call per dict); anything else takes the Python encoder. One difference: in the
    vectorized pass an integer in a list that also holds floats is written as a float (1.0).
    """
    try:
        values = pa.array(objects)  # full inference: a sampled struct type would drop keys it did not see
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        values = None
    if values is None or not pa.types.is_struct(values.type) or not _plain(values, len(objects)):
        return [_ENCODER.encode(o) for o in objects]
    names = sorted(field.name for field in values.type)
    ordered = pa.StructArray.from_arrays([values.field(n) for n in names], names=names)
    return cast(pl.Series, pl.from_arrow(ordered)).struct.json_encode().to_list()


def _to_arrow(values: list) -> pa.Array:
    """``pa.array(values)`` with the type inferred from a sample of rows: inferring over every row of
    nested float lists is ~20x slower than converting them to a known type. Only a sample type whose
    leaves are all floats or strings is trusted (a value of another kind fails the conversion, and
    then the whole list is inferred): Arrow converts a float to a sampled integer type by truncating
    it (2.5 -> 2) without an error. Otherwise every row is inferred (integers in a column that also
    holds floats are then written as floats, 2.0, as in ``json_objects``)."""
    sample_type = pa.array(values[:: max(1, len(values) // 64)]).type
    if not _float_or_string_leaves(sample_type):
        return pa.array(values)
    try:
        return pa.array(values, type=sample_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return pa.array(values)


def _float_or_string_leaves(data_type: pa.DataType) -> bool:
    """True when every leaf of ``data_type`` (through lists and structs) is a float or a string."""
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return _float_or_string_leaves(data_type.value_type)
    if pa.types.is_struct(data_type):
        return all(_float_or_string_leaves(data_type.field(i).type) for i in range(data_type.num_fields))
    return pa.types.is_floating(data_type) or pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _plain(values: pa.StructArray, count: int) -> bool:
    """True when no field is null (a missing key), every float is finite and every string ASCII, at any list depth."""
    if values.null_count or len(values) != count:
        return False
    for field_index in range(values.type.num_fields):
        column = values.field(field_index)
        while pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            if column.null_count:
                return False
            column = pc.list_flatten(column)
        if column.null_count or pa.types.is_struct(column.type) or pa.types.is_null(column.type):
            return False
        if pa.types.is_floating(column.type) and len(column) and not pc.all(pc.is_finite(column)).as_py():
            return False
        if pa.types.is_string(column.type):
            if len(column) and not pc.all(pc.string_is_ascii(column)).as_py():
                return False  # the Python encoder escapes non-ASCII characters, polars does not
        elif not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
            return False
    return True
