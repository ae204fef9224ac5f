"""Write several row views of one table, gathering each row once.

The release's pool view holds every row of the pool in question_id order, and the train and test
views hold subsets in the same order: each is a subsequence of the pool view. Gathering each
view's rows on its own reads the big table at random three times (about 1 us per row); here the
pool view's chunks are gathered once, column by column on the writer threads, and each other
view takes its rows out of every gathered chunk with ascending indices (a sequential pass),
buffered until a part file is full (so up to a part file of rows per view is held besides
the chunk). Each file holds the same rows in the same order and is encoded from one chunk per
column, so the files are the same bytes as when every view is gathered on its own. A chunk whose rows are
already in order (a pool that came sorted by question_id, e.g. a re-split's) is a slice or one plain take
(``base_gather``).
``write_pieces`` does the buffering and file cutting for any producer of such chunks; the partitioned
path's spilled sources (a ``JointSource``: one spill part read and ordered once for the pool, train and
test) use it through ``write_joint``.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

import numpy as np
import pyarrow as pa


WAITING = 1  # part files not yet written when the next chunk is gathered: bounds the memory held
WritePart = Callable[[list[pa.Table], str, int], None]  # ([table], folder, file number): the list is emptied


class SharedTable(Protocol):
    table: pa.Table

    def single_chunk(self) -> pa.Table: ...


class View(Protocol):
    """A row view (the writer's ``TableRows``): ``rows`` of the table ``shared`` holds."""

    rows: np.ndarray
    num_rows: int

    @property
    def shared(self) -> SharedTable:
        """The table the rows are of (read-only: a view never changes its table)."""
        ...


@dataclass
class Member:
    """One folder's view and where its rows sit in the group's base view (ascending positions)."""

    folder: str
    positions: np.ndarray | None  # None: the base view itself
    pending: list[pa.Table] = field(default_factory=list)
    held: int = 0
    files: int = 0


@dataclass
class Group:
    """Views of one table whose rows are all subsequences of ``base``'s (the largest view)."""

    shared: SharedTable
    base: View
    members: list[Member]


def subsequence_positions(where: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """Positions in the base view of ``rows`` (``where``: base position per table row, -1 when
    absent), or None unless every row is in the base view and they come in the base's order."""
    positions = where[rows]
    if len(positions) and (positions.min() < 0 or np.any(positions[1:] <= positions[:-1])):
        return None
    return positions


def plan_groups(views: list[tuple[str, View]]) -> list[Group]:
    """Group (folder, view) pairs by shared table: a view joins its table's group when its rows are
    a subsequence of the group's largest view. Only groups of two views or more are returned; the
    other views are written on their own."""
    by_table: dict[int, list[tuple[str, View]]] = {}
    for folder, view in views:
        by_table.setdefault(id(view.shared), []).append((folder, view))
    groups = []
    for same in (pairs for pairs in by_table.values() if len(pairs) > 1):
        base_folder, base = max(same, key=lambda pair: pair[1].num_rows)
        where = np.full(base.shared.table.num_rows, -1, dtype=np.int64)
        where[base.rows] = np.arange(base.num_rows)
        if np.count_nonzero(where >= 0) != base.num_rows:  # the base repeats rows
            continue
        members = [Member(base_folder, None)]
        for folder, view in same:
            positions = None if view is base else subsequence_positions(where, view.rows)
            if positions is not None:
                members.append(Member(folder, positions))
        if len(members) > 1:
            groups.append(Group(base.shared, base, members))
    return groups


def write_group(group: Group, size: int, threads: Executor, write_part: WritePart) -> None:
    """Write every member's part files of ``size`` rows: the base view's chunks gathered once (one
    task per column on ``threads``), the files encoded on ``threads`` while the next chunk is
    gathered; at most WAITING files are unwritten when the next gather starts."""
    table = group.shared.single_chunk()
    n = group.base.num_rows

    def chunks() -> Iterator[list[pa.Table]]:
        for start in range(0, max(n, 1), size):
            rows = group.base.rows[start:start + size]
            within = [None if m.positions is None else _rows_within(m.positions, start, len(rows)) for m in group.members]
            yield gather_rows(table, rows, within, threads)

    write_pieces(group.members, chunks(), size, threads, write_part, table.schema)


class JointSource(Protocol):
    """A row source that gives its rows together with those of the other sources of the same ``joint``
    (e.g. a spilled pool's train, test and pool), reading what they share once."""

    joint: object  # the sources with the same object are written together
    schema: pa.Schema
    num_rows: int

    def joint_chunks(self, sources: list["JointSource"], threads: Executor) -> Iterator[list[pa.Table]]:
        """Per step, the next rows of each of ``sources`` (same joint; pieces of any length, in order)."""
        ...


def write_joint(views: list[tuple[str, JointSource]], size: int, threads: Executor, write_part: WritePart) -> set[str]:
    """Write the (folder, source) pairs whose sources share a ``joint`` with another, one pass per joint
    (``write_pieces``); return the folders written (the others are left to the caller)."""
    by_joint: dict[int, list[tuple[str, JointSource]]] = {}
    for folder, source in views:
        by_joint.setdefault(id(source.joint), []).append((folder, source))
    written: set[str] = set()
    for same in (pairs for pairs in by_joint.values() if len(pairs) > 1):
        sources = [source for _, source in same]
        members = [Member(folder, None) for folder, _ in same]
        write_pieces(members, sources[0].joint_chunks(sources, threads), size, threads, write_part, sources[0].schema)
        written.update(folder for folder, _ in same)
    return written


def write_pieces(members: list[Member], chunks: Iterator[list[pa.Table]], size: int, threads: Executor,
                 write_part: WritePart, schema: pa.Schema) -> None:
    """Write each member's rows as part files of ``size`` rows: ``chunks`` yields a list of one piece per
    member (its next rows, in order; pieces of any length), asked for only when at most WAITING files are
    still being encoded on ``threads``; the pieces are taken out of the list (the producer may still hold
    it). A member with no rows gets one empty file (of ``schema``)."""
    futures: list[Future] = []
    while True:
        while len(waiting := [f for f in futures if not f.done()]) > WAITING:
            wait(waiting, return_when=FIRST_COMPLETED)
        for future in futures:
            if future.done():
                future.result()  # a writer thread's error stops the gathering
        futures = [f for f in futures if not f.done()]
        pieces = next(chunks, None)
        last = pieces is None
        for member in members:
            if pieces is not None:  # taken out of the list: a chunk is freed once its files are written
                member.pending.append(pieces.pop(0))
                member.held += member.pending[-1].num_rows
            while member.held >= size or (last and (member.held or not member.files)):  # an empty view: one empty file
                futures.append(threads.submit(write_part, [_first_rows(member, size, schema)], member.folder, member.files))
                member.files += 1
        if last:
            break
    for future in futures:
        future.result()  # raises a writer thread's error


def gather_rows(table: pa.Table, rows: np.ndarray, within: list[np.ndarray | None], threads: Executor) -> list[pa.Table]:
    """``table``'s ``rows`` and, per entry of ``within``, those of them at its positions (None: all).
    One task per column (the threads share the columns as they come), which also takes the
    members' rows out of that column."""
    base = base_gather(rows)
    subsets = [None if positions is None else pa.array(positions, pa.int64()) for positions in within]

    def gather(column: pa.ChunkedArray) -> list[pa.ChunkedArray]:
        values = base(column)
        return [values if subset is None else values.take(subset) for subset in subsets]

    columns = [future.result() for future in [threads.submit(gather, column) for column in table.columns]]
    return [pa.Table.from_arrays([pieces[i] for pieces in columns], schema=table.schema) for i in range(len(within))]


def base_gather(rows: np.ndarray) -> Callable[[pa.ChunkedArray], pa.ChunkedArray]:
    """How to gather ``rows`` of a column. Rows in ascending order (an input pool already sorted by
    question_id, e.g. a re-split's, gives the pool view 0..n-1) need no reordering: a contiguous range is a
    zero-copy slice, other ascending rows one take (a sequential pass); only rows out of order go through
    ``_SourceOrder`` (variable-width columns) or a random take."""
    span = ascending_range(rows)
    if span is not None and span[1] - span[0] == len(rows):  # n ascending rows over n: a contiguous range
        start, n = span[0], len(rows)
        return lambda column: column.slice(start, n)
    indices = pa.array(rows, pa.int64())
    if span is not None:
        return lambda column: column.take(indices)
    ordered = _SourceOrder(rows)
    return lambda column: ordered.take(column) if _variable_width(column) else column.take(indices)


def ascending_range(rows: np.ndarray) -> tuple[int, int] | None:
    """(first row, last row + 1) when ``rows`` are strictly ascending, else None (also for no rows); their
    number equals the span's exactly when they are that contiguous range. One vectorized pass."""
    if not len(rows) or (len(rows) > 1 and not bool((rows[1:] > rows[:-1]).all())):
        return None
    return int(rows[0]), int(rows[-1]) + 1


class _SourceOrder:
    """Gather ``rows`` of a column in two steps: ascending (a sequential pass over the big table),
    then into ``rows``' order within the chunk, which is small enough to stay in the cache. For
    strings and lists of the synthetic 4.2 M pool this took 0.79 of the CPU time of a direct
    random gather (1.03 s per 1 M rows), the shared sort included; fixed-width columns gain nothing."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self._steps: tuple[pa.Array, pa.Array] | None = None
        self._lock = threading.Lock()  # the columns' tasks ask at once

    def take(self, column: pa.ChunkedArray) -> pa.ChunkedArray:
        ascending, back = self._sorted()
        return column.take(ascending).take(back)

    def _sorted(self) -> tuple[pa.Array, pa.Array]:
        with self._lock:
            if self._steps is None:
                order = np.argsort(self.rows, kind="stable")
                back = np.empty(len(order), dtype=np.int64)
                back[order] = np.arange(len(order))
                self._steps = (pa.array(self.rows[order]), pa.array(back))
            return self._steps


def _variable_width(column: pa.ChunkedArray) -> bool:
    """Strings, binaries and lists that hold values (their gather chases offsets into the values)."""
    kind = column.type
    nested_or_text = pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
        or pa.types.is_large_binary(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind)
    return nested_or_text and column.null_count < len(column)


def _rows_within(positions: np.ndarray, start: int, n: int) -> np.ndarray:
    """The entries of the ascending ``positions`` in ``start``..``start + n``, counted from ``start``."""
    lo, hi = np.searchsorted(positions, [start, start + n])
    return positions[lo:hi] - start


def _first_rows(member: Member, size: int, schema: pa.Schema) -> pa.Table:
    """The first ``size`` (or fewer, at the end) rows held for ``member``; the rest stay held."""
    if not member.pending:
        return schema.empty_table()
    if len(member.pending) == 1 and member.held <= size:
        table = member.pending.pop()
    else:
        held = pa.concat_tables(member.pending)
        table, rest = held.slice(0, size), held.slice(size)
        member.pending = [rest] if rest.num_rows else []
    member.held -= table.num_rows
    return table
