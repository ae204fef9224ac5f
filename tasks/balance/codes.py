"""Integer codes for string columns, in sorted (byte = code point) order, via Arrow kernels.

Hash-based dictionary encoding plus a sort of the distinct values is far faster than
ranking millions of strings, and the codes compare like the strings they stand for.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of a (possibly chunked) column; a single chunk is not copied."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 0:
            return pa.array([], column.type)
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column


_array = combined


def dense_codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """(code per row, distinct values sorted); code i means ``values[i]``, -1 means null."""
    encoded = pc.dictionary_encode(_array(column))
    order = pc.sort_indices(encoded.dictionary).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    indices = pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64)
    codes = np.where(indices >= 0, rank[np.maximum(indices, 0)] if len(rank) else -1, -1)
    return codes, encoded.dictionary.take(pa.array(order))


def sort_order(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row numbers in ascending order of ``column`` (stable; nulls last)."""
    array = _array(column)
    if array.null_count == 0 and is_sorted(array):
        return np.arange(len(array))
    return pc.array_sort_indices(array).to_numpy().astype(np.int64)  # stable, nulls last


def is_sorted(array: pa.Array) -> bool:
    """True when a null-free string array is in non-decreasing order."""
    if len(array) < 2:
        return True
    return bool(pc.all(pc.less_equal(array.slice(0, len(array) - 1), array.slice(1))).as_py())


def repeats_in_order(array: pa.Array | pa.ChunkedArray, order: np.ndarray) -> np.ndarray:
    """Per row: True when an equal, non-null value comes earlier in the stable ``order``."""
    ranked = _array(array).take(pa.array(order))
    repeat = np.zeros(len(order), dtype=bool)
    if len(order) > 1:
        same = pc.equal(ranked.slice(1), ranked.slice(0, len(ranked) - 1))
        repeat[1:] = pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    out = np.zeros(len(order), dtype=bool)
    out[order] = repeat
    return out


def missing(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row: True when the string is null or empty."""
    array = _array(column)
    return pc.fill_null(pc.equal(pc.binary_length(array), 0), True).to_numpy(zero_copy_only=False)


def take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)``, faster for list columns at millions of rows.

    Arrow's take on list<string> columns is several times slower than on the flat child
    values, so list columns gather their child values with one flat index instead.
    """
    rows = np.asarray(rows, dtype=np.int64)
    index = pa.array(rows)

    def take(column: pa.ChunkedArray):
        if pa.types.is_list(column.type) and len(rows):
            return _take_list(_array(column), rows)
        if _few_distinct(column):
            return _take_strings(_array(column), index)
        return column.take(index)

    # Arrow releases the GIL inside take: columns go in parallel, largest first.
    order = sorted(range(table.num_columns), key=lambda i: -table.column(i).nbytes)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        taken = dict(zip(order, pool.map(lambda i: take(table.column(i)), order)))
    return pa.Table.from_arrays([taken[i] for i in range(table.num_columns)], schema=table.schema)


def flat_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Positions start..start+length-1 of every (start, length), concatenated."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)


def _take_list(array: pa.ListArray, rows: np.ndarray) -> pa.ListArray:
    offsets = array.offsets.to_numpy().astype(np.int64)
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    flat = flat_positions(starts, lengths)
    values = array.values
    values = _take_strings(values, pa.array(flat)) if _few_distinct(values) else values.take(pa.array(flat))
    mask = array.is_null().take(pa.array(rows)) if array.null_count else None
    return pa.ListArray.from_arrays(pa.array(new_offsets.astype(np.int32)), values, type=array.type, mask=mask)


def _few_distinct(values: pa.Array | pa.ChunkedArray, sample: int = 4096, limit: int = 256) -> bool:
    """A string column whose first values repeat a lot (sources, versions, domains, properties)."""
    if not pa.types.is_string(values.type) or len(values) < 4 * sample:
        return False
    return pc.count_distinct(values.slice(0, sample)).as_py() <= limit


def _take_strings(values: pa.Array, index: pa.Array) -> pa.Array:
    """Take through a dictionary: random reads hit a small, cache-resident dictionary."""
    encoded = pc.dictionary_encode(values)
    return encoded.dictionary.take(encoded.indices.take(index))


def require_columns(table: pa.Table, columns: tuple[str, ...]) -> None:
    """Raise a clear error naming the columns of ``columns`` that ``table`` lacks."""
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"question table lacks required column(s) {missing}; it has {table.column_names}")
