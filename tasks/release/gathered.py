"""Write several row views of one table, gathering each row once.

The release's pool view holds every row of the pool in question_id order, and the train and test
views hold subsets in the same order: each is a subsequence of the pool view. Gathering each
view's rows on its own reads the big table at random three times (about 1 us per row); here the
pool view's chunks are gathered once, column by column on the writer threads, and each other
view takes its rows out of every gathered chunk with ascending indices (a sequential pass),
buffered until a part file is full. Each file holds the same rows in the same order and is
encoded from one chunk per column, so the files are the same bytes as when every view is
gathered on its own.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np
import pyarrow as pa


WritePart = Callable[[list[pa.Table], str, int], None]  # ([table], folder, file number): the list is emptied


class SharedTable(Protocol):
    table: pa.Table

    def single_chunk(self) -> pa.Table: ...


class View(Protocol):
    """A row view (the writer's ``TableRows``): ``rows`` of the table ``shared`` holds."""

    shared: SharedTable
    rows: np.ndarray
    num_rows: int


@dataclass
class _Member:
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
    members: list[_Member]


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
        members = [_Member(base_folder, None)]
        for folder, view in same:
            positions = None if view is base else subsequence_positions(where, view.rows)
            if positions is not None:
                members.append(_Member(folder, positions))
        if len(members) > 1:
            groups.append(Group(base.shared, base, members))
    return groups


def write_group(group: Group, size: int, threads: Executor, write_part: WritePart) -> None:
    """Write every member's part files of ``size`` rows: the base view's chunks gathered once (one
    task per column on ``threads``), the files encoded on ``threads`` while the next chunk is
    gathered; at most one chunk's files wait for a thread before the next gather starts."""
    table = group.shared.single_chunk()
    futures: list[Future] = []
    n = group.base.num_rows
    for start in range(0, max(n, 1), size):
        while len(waiting := [f for f in futures if not f.done()]) > 1:  # bounds the chunks held for encoding
            wait(waiting, return_when=FIRST_COMPLETED)
        for future in futures:
            if future.done():
                future.result()  # a writer thread's error stops the gathering
        futures = [f for f in futures if not f.done()]
        rows = group.base.rows[start:start + size]
        within = [None if m.positions is None else _rows_within(m.positions, start, len(rows)) for m in group.members]
        for member, piece in zip(group.members, _gather(table, rows, within, threads)):
            member.pending.append(piece)
            member.held += piece.num_rows
            while member.held >= size or (start + size >= n and (member.held or not member.files)):
                futures.append(threads.submit(write_part, [_first_rows(member, size)], member.folder, member.files))
                member.files += 1
    for future in futures:
        future.result()  # raises a writer thread's error


def _gather(table: pa.Table, rows: np.ndarray, within: list[np.ndarray | None], threads: Executor) -> list[pa.Table]:
    """``table``'s ``rows`` and, per entry of ``within``, those of them at its positions (None: all).
    One task per column: the two threads share the columns as they come, and each column's rows
    of a member are taken while its gathered values are still in the cache."""
    indices = pa.array(rows, pa.int64())
    subsets = [None if positions is None else pa.array(positions, pa.int64()) for positions in within]

    def gather(column: pa.ChunkedArray) -> list[pa.ChunkedArray]:
        values = column.take(indices)
        return [values if subset is None else values.take(subset) for subset in subsets]

    columns = [future.result() for future in [threads.submit(gather, column) for column in table.columns]]
    return [pa.Table.from_arrays([pieces[i] for pieces in columns], schema=table.schema) for i in range(len(within))]


def _rows_within(positions: np.ndarray, start: int, n: int) -> np.ndarray:
    """The entries of the ascending ``positions`` in ``start``..``start + n``, counted from ``start``."""
    lo, hi = np.searchsorted(positions, [start, start + n])
    return positions[lo:hi] - start


def _first_rows(member: _Member, size: int) -> pa.Table:
    """The first ``size`` (or fewer, at the end) rows held for ``member``; the rest stay held."""
    if len(member.pending) == 1 and member.held <= size:
        table = member.pending.pop()
    else:
        held = pa.concat_tables(member.pending)
        table, rest = held.slice(0, size), held.slice(size)
        member.pending = [rest] if rest.num_rows else []
    member.held -= table.num_rows
    return table
