"""Row views of a table: rows in a given order, gathered only chunk by chunk when written.

The balancing hands the release writer ``TableRows`` views of the pool (and the partitioned path its own
``RowSource``), so a release gathers each row once, straight into the file it belongs to.
"""

from __future__ import annotations

import threading
from typing import Iterator, Protocol, Union, runtime_checkable

import numpy as np
import pyarrow as pa

from reasonvqa.codes import take_rows
from reasonvqa.gathered import ascending_range

ROWS_PER_FILE = 1_000_000  # rows per Parquet part file of a release table (the partitioned path cuts the same)


@runtime_checkable
class RowSource(Protocol):
    """Rows of a table produced in order, a chunk at a time, without holding them all."""

    num_rows: int

    def chunks(self, size: int) -> Iterator[pa.Table]:
        """Consecutive tables of ``size`` rows (the last may be shorter), in row order."""
        ...


Rows = Union[pa.Table, RowSource]


class _SharedTable:
    """The table behind several ``TableRows`` views; made single-chunk once, when first written."""

    def __init__(self, table: pa.Table):
        self.table = table
        self._lock = threading.Lock()  # the writer's threads ask at once

    def single_chunk(self) -> pa.Table:
        """The table with one chunk per column (Arrow's take on many chunks is 2-3x slower).

        Columns are combined one at a time and the chunked table is dropped first, so when the
        views hold the only reference (callers drop theirs) memory grows by one column, not a pool.
        """
        with self._lock:
            held, self.table = [self.table], None
            self.table = one_chunk_per_column(held)
            return self.table


class TableRows:
    """The rows ``rows`` (in that order) of ``table``, gathered only chunk by chunk when written.

    A release written from ``TableRows(pool, rows)`` gathers each row once, straight into the
    file it belongs to, instead of materializing reordered copies of the pool first. Views made
    with ``with_rows`` share the table (and its one-time combining into single chunks).
    """

    def __init__(self, table: pa.Table | _SharedTable, rows):
        self._shared = table if isinstance(table, _SharedTable) else _SharedTable(table)
        rows = np.asarray(rows)
        # a decision's int32 row numbers (reasonvqa/rows.py) are kept as they are, not widened
        self.rows = rows if rows.dtype in (np.int32, np.int64) else rows.astype(np.int64)
        self.num_rows = len(self.rows)

    @property
    def table(self) -> pa.Table:
        return self._shared.table

    @property
    def shared(self) -> _SharedTable:
        """The table behind this view and the views made from it with ``with_rows``."""
        return self._shared

    def with_rows(self, rows) -> "TableRows":
        """Another view of the same table."""
        return TableRows(self._shared, rows)

    def select(self, columns: list[str]) -> pa.Table:
        """A table of these rows and ``columns`` only."""
        return rows_of(self.table.select(columns), self.rows)

    def chunks(self, size: int) -> Iterator[pa.Table]:
        table = self._shared.single_chunk()
        for start in range(0, max(self.num_rows, 1), size):
            yield rows_of(table, self.rows[start:start + size])

    def slices(self, columns: list[str], size: int) -> Iterator[pa.Table]:
        """``columns`` of these rows, ``size`` rows at a time (each slice gathered alone)."""
        table = self.table.select(columns)
        for start in range(0, self.num_rows, size):
            yield rows_of(table, self.rows[start:start + size])


def rows_of(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``take_rows(table, rows)`` of an in-memory table. Ascending rows (views of a pool that came in question_id
    order, e.g. a re-split's) are cut from their range of the table first: a contiguous range is a zero-copy slice,
    other ascending rows are taken from the chunks of their range only (Arrow's take from a column of many chunks
    costs about the whole column per call: half the CPU for the breakdown's slices of the sorted 4.2 M pool)."""
    span = ascending_range(rows)
    if span is None:
        return take_rows(table, rows)
    start, stop = span
    if stop - start == len(rows):
        return table.slice(start, stop - start)
    return take_rows(table.slice(start, stop - start), rows - start)


def one_chunk_per_column(held: list[pa.Table]) -> pa.Table:
    """The table taken out of ``held`` with no column of several chunks (free when it has none),
    combined a column at a time: when ``held`` had the only reference, one column is held twice."""
    table = held.pop()
    if not any(column.num_chunks > 1 for column in table.columns):
        return table
    schema, columns = table.schema, list(table.columns)
    del table
    for i, column in enumerate(columns):
        columns[i] = pa.chunked_array([column.combine_chunks()], column.type)
        del column
    return pa.Table.from_arrays(columns, schema=schema)
