"""Integer codes for string columns, in sorted (byte = code point) order, via Arrow kernels.

Hash-based dictionary encoding plus a sort of the distinct values is far faster than
ranking millions of strings, and the codes compare like the strings they stand for. Distinct
values (question ids) are ordered by their bytes 8 at a time with numpy (``byte_order``).
"""

from __future__ import annotations

from concurrent.futures import Executor, Future

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import DTypeLike

from reasonvqa.rows import row_dtype, row_numbers

def combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of a (possibly chunked) column; a single chunk is not copied."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 0:
            return pa.array([], column.type)
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column



def filled(table: pa.Table, name: str, default) -> pa.Array | pa.ChunkedArray:
    """The column ``name`` with nulls as ``default``; a column of ``default`` (typed, also when empty) when the
    table has none."""
    if name not in table.column_names:
        return pa.repeat(pa.scalar(default), table.num_rows)
    return pc.fill_null(table[name], default)


def dense_codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """(code per row, distinct values sorted); code i means ``values[i]``, -1 means null; codes in
    ``rows.row_dtype`` of the column's length."""
    encoded = pc.dictionary_encode(combined(column))
    order = pc.sort_indices(encoded.dictionary).to_numpy()
    rank = np.empty(len(order) + 1, dtype=row_dtype(len(column)))  # last slot: null
    rank[order] = np.arange(len(order))
    rank[-1] = -1
    indices = encoded.indices
    indices = pc.fill_null(indices, len(order)) if indices.null_count else indices
    return rank[indices.to_numpy()], encoded.dictionary.take(pa.array(order))


class ColumnCodes:
    """Dense codes and sort orders of one table's columns, each computed once: the balancing, the
    split and the seen-in-train check of one decision share them."""

    def __init__(self, table: pa.Table, background: Executor | None = None):
        self.table = table
        self.background = background
        self._dense: dict[str, tuple[np.ndarray, pa.Array]] = {}
        self._pending: dict[str, Future] = {}
        self._sorted: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._missing: dict[str, np.ndarray] = {}
        self._combined: dict[str, pa.Array] = {}

    def prefetch(self, names: tuple[str, ...]) -> None:
        """Start the dense codes of ``names`` on the ``background`` executor (Arrow's hashing
        releases the GIL), in that order; without one, nothing. Absent columns are left to the
        step that needs them (and raises its own error)."""
        for name in names:
            if (self.background is not None and name in self.table.column_names
                    and name not in self._dense and name not in self._pending):
                self._pending[name] = self.background.submit(dense_codes, self.table[name])

    def dense(self, name: str) -> tuple[np.ndarray, pa.Array]:
        """``dense_codes`` of the column ``name``."""
        if name not in self._dense:
            pending = self._pending.get(name)
            self._dense[name] = pending.result() if pending is not None else dense_codes(self.table[name])
        return self._dense[name]

    def sorted(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``sort_with_repeats`` of the column ``name``."""
        if name not in self._sorted:
            self._sorted[name] = sort_with_repeats(self.table[name])
        return self._sorted[name]

    def missing(self, name: str) -> np.ndarray:
        """``missing`` of the column ``name``, from its dense codes ("" sorts first); computed once."""
        if name not in self._missing:
            code, values = self.dense(name)
            gone = code < 0
            if len(values) and len(values[0].as_py()) == 0:
                gone |= code == 0
            self._missing[name] = gone
        return self._missing[name]

    def combined(self, name: str) -> pa.Array:
        """The column ``name`` as one array, joined once (Arrow's take from a many-chunk column joins its
        chunks first, on every call)."""
        if name not in self._combined:
            self._combined[name] = combined(self.table[name])
        return self._combined[name]

    def take(self, name: str, rows: np.ndarray) -> pa.Array:
        """``column.take(rows)`` as one array: from the sorted distinct values when the column's dense
        codes are at hand (gathering from a small dictionary was 8x faster than from 4.2 M strings), else
        from the column joined once (``combined``)."""
        if name not in self._dense and name not in self._pending:
            return self.combined(name).take(pa.array(rows))  # int32 or int64 rows: Arrow takes either
        code, values = self.dense(name)
        picked = code[rows]
        null = picked < 0
        return values.take(pa.array(picked, mask=null if null.any() else None))

    def order_of(self, name: str, rows: np.ndarray) -> np.ndarray:
        """``sort_order`` of the column ``name`` taken at ``rows``: positions into ``rows``."""
        if name not in self._sorted:
            column = self.table[name]
            return sort_order(column if len(rows) == len(column) and (rows == np.arange(len(rows))).all()
                              else column.take(pa.array(rows)))
        order, repeat = self._sorted[name]
        value = np.empty(len(order), row_dtype(len(order)))  # equal values share a number, in value order; nulls last
        value[order] = np.cumsum(~repeat[order], dtype=value.dtype) - 1
        value[order[len(order) - self.table[name].null_count:]] = len(order)
        picked = value[rows]
        if len(picked) < 2 or bool((picked[1:] > picked[:-1]).all()):
            return row_numbers(len(picked))
        return np.argsort(picked, kind="stable")


def sort_order(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Row numbers in ascending order of ``column`` (stable; nulls last), in ``rows.row_dtype``."""
    return sort_with_repeats(column)[0]


def sort_with_repeats(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """``sort_order(column)`` and, per row, ``repeats_in_order(column, order)``.

    Strings and binaries are ordered by their bytes 8 at a time (``byte_order``): the same order as
    Arrow's ``array_sort_indices`` at a fraction of its cost on hashed ids; other types go to Arrow.
    """
    result = byte_order(column)
    if result is not None:
        return result
    array = combined(column)
    if array.null_count == 0 and is_sorted(array):
        order = row_numbers(len(array))
    else:
        order = pc.array_sort_indices(array).to_numpy().astype(row_dtype(len(array)))  # stable, nulls last
    return order, repeats_in_order(array, order)


_BYTE_TYPES = (pa.string(), pa.binary(), pa.large_string(), pa.large_binary())
_PREFIX_MASK = np.array([((1 << 64) - 1) ^ ((1 << (64 - 8 * n)) - 1) for n in range(9)], dtype=np.uint64)
# Arrow's sort is faster when more than 1/8 of the rows (and more than 2^16) tie on their first 8 bytes
_FALLBACK_TIED_SHARE, _FALLBACK_MIN_TIED = 8, 1 << 16


class _Bytes:
    """The values of a (chunked) string or binary column as byte ranges, read 8 bytes at a time."""

    def __init__(self, column: pa.Array | pa.ChunkedArray):
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []  # per chunk: (value starts, data bytes)
        lengths = []
        for chunk in chunks:
            _, offsets_buffer, data = chunk.buffers()
            offsets = (np.frombuffer(offsets_buffer, _offset_type(chunk.type))[chunk.offset:chunk.offset + len(chunk) + 1]
                       if offsets_buffer is not None and len(chunk) else np.zeros(1, np.int64))
            self.parts.append((offsets[:-1], np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)))
            lengths.append(np.diff(offsets))
        self.lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        self.chunk_ends = np.cumsum([len(c) for c in chunks], dtype=np.int64)

    def first_keys(self) -> np.ndarray:
        """``key(all rows, 0)``, chunk by chunk."""
        keys = [_read8(data, starts) for starts, data in self.parts]
        out = np.concatenate(keys) if len(keys) > 1 else keys[0] if keys else np.zeros(0, np.uint64)
        if len(out) and int(self.lengths.min()) < 8:
            out &= _PREFIX_MASK[np.minimum(self.lengths, 8)]
        return out

    def key(self, rows: np.ndarray, at: int) -> np.ndarray:
        """Bytes ``at``..``at+7`` of each row's value as a big-endian uint64, zero past its end."""
        out = np.empty(len(rows), np.uint64)
        chunk = np.searchsorted(self.chunk_ends, rows, side="right")
        starts_before = np.concatenate([[0], self.chunk_ends[:-1]])
        for k, (starts, data) in enumerate(self.parts):
            mine = chunk == k
            out[mine] = _read8(data, starts[rows[mine] - starts_before[k]] + at)
        return out & _PREFIX_MASK[np.clip(self.lengths[rows] - at, 0, 8)]


def _read8(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``data[s:s+8]`` for each start ``s`` as a big-endian uint64, zero bytes past the end of ``data``."""
    n = len(data)
    out = np.zeros(len(starts), np.uint64)
    if n >= 8:  # a big-endian uint64 at every byte (unaligned reads: one item per row, not 8 bytes)
        window = np.ndarray(shape=(n - 7,), dtype=">u8", buffer=data, strides=(1,))
        out[:] = window[np.minimum(starts, n - 8)]
    near = np.flatnonzero(starts > n - 8)  # the last values of the buffer: read from a zero-padded copy
    if len(near):
        tail_at = max(n - 8, 0)
        tail = np.zeros(17, np.uint8)
        tail[:n - tail_at] = data[tail_at:]
        window = np.ndarray(shape=(10,), dtype=">u8", buffer=tail, strides=(1,))
        out[near] = window[np.minimum(starts[near] - tail_at, 9)]
    return out


def _offset_type(type_: pa.DataType) -> type:
    return np.int64 if type_ in (pa.large_string(), pa.large_binary()) else np.int32


def byte_order(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(order, repeat)`` of a string or binary column by its bytes (unsigned, a prefix first), as
    ``sort_with_repeats``; None for other types or when most values share their first 8 bytes.

    One argsort of each value's first 8 bytes as a uint64 orders almost every row of hashed ids;
    the rows whose 8 bytes tie are ordered by their next 8 bytes, and so on, then by length and row.
    """
    if column.type not in _BYTE_TYPES:
        return None
    n = len(column)
    values = _Bytes(column)
    key = values.first_keys()
    if column.null_count:
        valid = _valid_rows(column)
        key = key[valid]
    by_key = np.argsort(key)  # not stable: tied rows are re-sorted below, row number last
    order, key = (valid[by_key] if column.null_count else by_key), key[by_key]
    same = key[1:] == key[:-1]
    tied = np.zeros(len(order), bool)
    tied[1:] |= same
    tied[:-1] |= same
    n_tied = int(tied.sum())
    if n_tied > _FALLBACK_MIN_TIED and n_tied * _FALLBACK_TIED_SHARE > n:
        return None
    repeat = np.zeros(n, bool)
    _order_ties(values, order, np.flatnonzero(tied), repeat)
    return np.concatenate([order, _null_rows(column)], dtype=row_dtype(n)), repeat


def _order_ties(values: _Bytes, order: np.ndarray, at_positions: np.ndarray, repeat: np.ndarray) -> None:
    """Re-sort in place the positions of ``order`` whose rows tie on their first bytes, by byte
    chunks, then length (a value that is a prefix of another comes first), then row number; mark
    the rows equal to an earlier one in ``repeat``."""
    pos = at_positions
    if len(pos):  # groups: runs of adjacent tied positions with equal first bytes
        first = values.key(order[pos], 0)
        group = np.cumsum(np.concatenate([[True], (np.diff(pos) != 1) | (first[1:] != first[:-1])]))
    at = 0
    while len(pos):
        rows = order[pos]
        key = values.key(rows, at)
        # a value ending within these 8 bytes sorts by its length before every longer one of its group
        ended = np.minimum(values.lengths[rows], at + 9)
        perm = np.lexsort((rows, ended, key, group))
        rows, key, ended, grp = rows[perm], key[perm], ended[perm], group[perm]
        order[pos] = rows
        same = (grp[1:] == grp[:-1]) & (key[1:] == key[:-1]) & (ended[1:] == ended[:-1])
        repeat[rows[1:][same & (ended[1:] <= at + 8)]] = True  # equal bytes and length: equal values
        go_on = np.zeros(len(rows), bool)
        go_on[1:] |= same & (ended[1:] > at + 8)
        go_on[:-1] |= same & (ended[1:] > at + 8)
        group = np.cumsum(np.concatenate([[True], ~same]))[go_on]
        pos = pos[go_on]
        at += 8


def _valid_rows(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if column.null_count == 0:
        return np.arange(len(column), dtype=np.int64)
    return np.flatnonzero(pc.is_valid(column).to_numpy(zero_copy_only=False))


def _null_rows(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if column.null_count == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(pc.is_null(column).to_numpy(zero_copy_only=False))


def is_sorted(array: pa.Array) -> bool:
    """True when a null-free string array is in non-decreasing order."""
    if len(array) < 2:
        return True
    return bool(pc.all(pc.less_equal(array.slice(0, len(array) - 1), array.slice(1))).as_py())


def repeats_in_order(array: pa.Array | pa.ChunkedArray, order: np.ndarray) -> np.ndarray:
    """Per row: True when an equal, non-null value comes earlier in the stable ``order``."""
    ranked = combined(array).take(pa.array(order))
    repeat = np.zeros(len(order), dtype=bool)
    if len(order) > 1:
        same = pc.equal(ranked.slice(1), ranked.slice(0, len(ranked) - 1))
        repeat[1:] = pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    out = np.zeros(len(order), dtype=bool)
    out[order] = repeat
    return out


def mutual_in(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(np.isin(a, b), np.isin(b, a))`` for large integer arrays (NumPy 2's ``isin`` took 2 s for 1.1 M in 2.6 M
    uint64 here). The shorter side's rows are ordered (argsort) and the other side's values sorted (a SIMD sort,
    a third of an argsort) for the first mask; the other side's rows are ordered only when a value is shared."""
    if len(b) < len(a):
        b_in_a, a_in_b = mutual_in(b, a)
        return a_in_b, b_in_a
    a_order = np.argsort(a)
    a_sorted = a[a_order]
    hit = _found(a_sorted, np.sort(b))
    if not hit.any():  # train and test share no key (hashed pairs of image-specific questions): b needs no order
        return _scattered(a_order, hit), np.zeros(len(b), dtype=bool)
    b_order = np.argsort(b)
    return _scattered(a_order, hit), _scattered(b_order, _found(b[b_order], a_sorted[hit]))


def _found(values: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Per value of the sorted ``values``: True when it occurs in the sorted ``among``."""
    if len(among) == 0:
        return np.zeros(len(values), dtype=bool)
    return among[np.minimum(np.searchsorted(among, values), len(among) - 1)] == values


def _scattered(order: np.ndarray, in_order: np.ndarray) -> np.ndarray:
    """``in_order`` (one flag per position of ``order``) back in row order."""
    out = np.empty(len(order), dtype=bool)
    out[order] = in_order
    return out


def unique_ints(values: np.ndarray, *, inverse: bool = False, counts: bool = False,
                dtype: DTypeLike = np.int64) -> tuple[np.ndarray, ...]:
    """``np.unique(values, return_inverse=inverse, return_counts=counts)`` of an integer array (inverse as ``dtype``,
    e.g. ``rows.row_dtype(len(values))``; values as int64 when counted). Booleans and floats are refused: a boolean array would index as a mask.

    When the values span at most 8 times their number (or 2^16) they are counted over min..max instead
    of sorted: a presence table (a ``bincount`` when ``counts``) whose running sum is the dense code."""
    values = np.asarray(values)
    if values.dtype.kind not in "iu":
        raise TypeError(f"unique_ints takes integers, not {values.dtype}")
    if len(values) == 0:
        empty = np.zeros(0, np.int64)
        return (values.astype(np.int64),) + ((empty.astype(dtype),) if inverse else ()) + ((empty,) if counts else ())
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    if span > max(8 * len(values), 1 << 16):
        out = np.unique(values, return_inverse=inverse, return_counts=counts)  # type: ignore[call-overload]  # numpy's stubs overload literal flags only
        if not isinstance(out, tuple):
            return (out,)
        return (out[0], out[1].astype(dtype, copy=False), *out[2:]) if inverse else out
    offset = values - low if low else values
    if counts:
        count = np.bincount(offset, minlength=span)
        present = count > 0
    else:
        present = np.zeros(span, dtype=bool)
        present[offset] = True
    out = (np.flatnonzero(present) + low,)
    if inverse:
        code = np.cumsum(present, dtype=np.int32 if span < 1 << 31 else np.int64) - 1  # int32: a table that caches better
        out += (code[offset].astype(dtype, copy=False),)
    return out + ((count[present],) if counts else ())


def missing(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row: True when the string is null or empty."""
    array = combined(column)
    return pc.fill_null(pc.equal(pc.binary_length(array), 0), True).to_numpy(zero_copy_only=False)


def take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table.take(rows)``: with pyarrow 26, Arrow's own take (chunk-aware) measured 2-4x faster
    on the synthetic pool than gathering list columns through their flat values and repeated
    strings through a dictionary, which an older Arrow needed."""
    return table.take(pa.array(np.asarray(rows, dtype=np.int64)))


def require_columns(table: pa.Table, columns: tuple[str, ...]) -> None:
    """Raise a clear error naming the columns of ``columns`` that ``table`` lacks."""
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"question table lacks required column(s) {missing}; it has {table.column_names}")
