"""Balance, split and write a release from a pool kept on disk (pools larger than memory).

``pipeline.plan_release`` holds the whole pool in memory (about 270 bytes per question of the
synthetic pool: 11 GB at 42 M questions). Here the pool stays in its Parquet files:

1. Decide on the key columns only (question_id, image_id, property_id, answer, n_hop): the same
   ``pipeline.decide`` on integer codes as in memory. The seen-in-train check compares the
   (question, answer) strings inside hash partitions spilled to disk, one partition in memory at
   a time (exact: equal pairs always land in the same partition).
2. Spill: the pool is streamed in record batches; each row goes, with its rank in question_id
   order and its destination (train, test, removed), to the spill file of the pool part file it
   belongs to (rank // ROWS_PER_FILE), as uncompressed Arrow IPC.
3. Write: ``SpilledRows`` sources read one spill file at a time (memory-mapped), order it by
   rank and give ``write_release`` the pool's, train's or test's rows chunk by chunk, so the
   release files are byte-identical to the in-memory path's (tested).

Statistics come from ``stats.write_stats`` over views of a narrow table (the columns the
counts need); the bias report reads the four columns it needs of train and test.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa.tasks.balance.codes import take_rows
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.pipeline import BalancedSplit, decide, question_answer_pairs
from reasonvqa.tasks.balance.stats import COUNT_COLUMNS
from reasonvqa.tasks.release.writer import ROWS_PER_FILE, TableRows

KEY_COLUMNS = ["question_id", "image_id", "property_id", "answer", "n_hop"]
KIND_COLUMNS = ["kind", "task_type", "is_hallucination"]  # read when the pool files have them (pipeline.decide)
BATCH_ROWS = 262_144  # rows per record batch streamed from the pool files
PAIR_PARTITIONS = 16
REMOVED, TRAIN, TEST = 0, 1, 2
RANK, DEST = "__rank", "__dest"


def read_columns(paths: list[Path], columns: list[str]) -> pa.Table:
    """``columns`` of every pool file, concatenated in file order, one chunk per column."""
    tables = [pq.read_table(path, columns=columns) for path in paths]
    return pa.concat_tables(tables).combine_chunks()


def stream(paths: list[Path], columns: list[str] | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first global row number, batch) over the pool files in order."""
    start = 0
    for path in paths:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=columns):
            yield start, batch
            start += batch.num_rows


def plan_partitioned(paths: list[Path], balance: BalanceConfig, split: SplitConfig, seed: int, work_dir: Path,
                     rows_per_file: int = ROWS_PER_FILE) -> BalancedSplit:
    """``plan_release`` for a pool in Parquet ``paths`` (rows in file order), spilling under ``work_dir``.

    Returns views for ``write_stats`` and sources for ``write_release``: ``pool``, ``split.train`` and
    ``split.test`` are ``SpilledRows`` (each with ``select`` for the few columns statistics read);
    ``counts`` holds the narrow table the statistics count from.
    """
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    present = set(pq.read_schema(paths[0]).names) if paths else set()
    keys = read_columns(paths, KEY_COLUMNS + [c for c in KIND_COLUMNS if c in present])
    seen = _SeenInTrain(paths, work_dir / "pairs")
    balanced, result = decide(keys, balance, split, seed, seen_in_train=seen)
    order = balanced.question_id_order
    del keys
    n = len(order)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    dest = np.zeros(n, dtype=np.int8)
    dest[result.train_rows] = TRAIN
    dest[result.test_rows] = TEST
    spill = _spill(paths, rank, dest, work_dir / "pool", rows_per_file)
    counts = read_columns(paths, COUNT_COLUMNS)
    result.train = SpilledRows(spill, TRAIN, len(result.train_rows), counts, result.train_rows)
    result.test = SpilledRows(spill, TEST, len(result.test_rows), counts, result.test_rows)
    pool = SpilledRows(spill, None, n, counts, order)
    return BalancedSplit(pool=pool, balance=balanced, split=result)


@dataclass
class _Spill:
    files: list[Path]  # pool part k's rows, unordered, with RANK and DEST columns
    schema: pa.Schema  # the pool's own columns


def _spill(paths: list[Path], rank: np.ndarray, dest: np.ndarray, folder: Path, rows_per_file: int) -> _Spill:
    """Stream the pool into one IPC file per pool part file (rank // rows_per_file)."""
    folder.mkdir(parents=True)
    n_parts = max(1, -(-len(rank) // rows_per_file))
    files = [folder / f"{k:05d}.arrow" for k in range(n_parts)]
    schema = pq.read_schema(paths[0]).remove_metadata() if paths else pa.schema([])
    writers = {}
    try:
        for start, batch in stream(paths):
            rows = np.arange(start, start + batch.num_rows)
            part = rank[rows] // rows_per_file
            by_part = np.argsort(part, kind="stable")
            bounds = np.searchsorted(part[by_part], np.arange(n_parts + 1))
            batch = batch.append_column(RANK, pa.array(rank[rows])).append_column(DEST, pa.array(dest[rows]))
            for k in np.flatnonzero(np.diff(bounds)).tolist():
                piece = batch.take(pa.array(by_part[bounds[k]:bounds[k + 1]]))
                if k not in writers:
                    writers[k] = pa.ipc.new_file(files[k], piece.schema)
                writers[k].write_batch(piece)
    finally:
        for writer in writers.values():
            writer.close()
    return _Spill(files=files, schema=schema)


class SpilledRows:
    """The pool's (``dest`` None), train's or test's rows in question_id order, read from the spill
    one pool part at a time (a ``RowSource`` for ``write_release``)."""

    def __init__(self, spill: _Spill, dest: int | None, num_rows: int, counts: pa.Table, rows: np.ndarray):
        self.spill, self.dest, self.num_rows = spill, dest, num_rows
        self.view = TableRows(counts, rows)  # the narrow columns statistics count from

    @property
    def table(self) -> pa.Table:
        return self.view.table

    @property
    def rows(self) -> np.ndarray:
        return self.view.rows

    def select(self, columns: list[str]) -> pa.Table:
        """``columns`` of these rows, materialized (from the narrow table when it has them)."""
        if all(c in self.view.table.column_names for c in columns):
            return self.view.select(columns)
        pieces = list(self._pieces(columns))
        return pa.concat_tables(pieces).combine_chunks() if pieces else self.spill.schema.empty_table().select(columns)

    def chunks(self, size: int) -> Iterator[pa.Table]:
        pending: list[pa.Table] = []
        held = 0
        emitted = False
        for piece in self._pieces(self.spill.schema.names):
            pending.append(piece)
            held += piece.num_rows
            while held >= size:
                table = pa.concat_tables(pending)
                yield table.slice(0, size)
                emitted = True
                rest = table.slice(size)
                pending, held = ([rest] if rest.num_rows else []), rest.num_rows
        if held or not emitted:
            yield pa.concat_tables(pending) if pending else self.spill.schema.empty_table()

    def _pieces(self, columns: list[str]) -> Iterator[pa.Table]:
        """Per spill file in order: its rows of this destination, by rank, only ``columns``."""
        for path in self.spill.files:
            if not path.exists():
                continue
            with pa.memory_map(str(path)) as source:  # the gather copies out of the map before it closes
                table = pa.ipc.open_file(source).read_all()
                order = np.argsort(table[RANK].to_numpy(), kind="stable")
                if self.dest is not None:
                    order = order[table[DEST].to_numpy()[order] == self.dest]
                piece = take_rows(table.select(columns), order).combine_chunks()
                del table
            yield piece


class _SeenInTrain:
    """The seen-in-train check over hash partitions of the (question, answer) strings on disk."""

    def __init__(self, paths: list[Path], folder: Path, partitions: int = PAIR_PARTITIONS):
        self.paths, self.folder, self.partitions = paths, folder, partitions

    def __call__(self, test_rows: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
        side = np.zeros(sum(pq.ParquetFile(p).metadata.num_rows for p in self.paths), dtype=np.int8)
        side[train_rows], side[test_rows] = TRAIN, TEST
        self.folder.mkdir(parents=True)
        files = [self.folder / f"{k:03d}.arrow" for k in range(self.partitions)]
        schema = pa.schema([("row", pa.int64()), ("side", pa.int8()), ("pair", pa.large_string())])
        writers = [pa.ipc.new_file(f, schema) for f in files]
        try:
            for start, batch in stream(self.paths, ["question", "answer"]):
                rows = np.arange(start, start + batch.num_rows)
                mine = side[rows] > 0
                pairs = pl.Series(question_answer_pairs(pa.Table.from_batches([batch]).filter(pa.array(mine))))
                bucket = (pairs.hash(seed=0) % self.partitions).to_numpy()
                chunk = pa.table({"row": rows[mine], "side": side[rows[mine]], "pair": pairs.to_arrow().cast(pa.large_string())})
                for k in range(self.partitions):
                    writers[k].write_table(chunk.filter(pa.array(bucket == k)))
        finally:
            for writer in writers:
                writer.close()
        seen_rows = []
        for f in files:
            with pa.memory_map(str(f)) as source:
                part = pl.from_arrow(pa.ipc.open_file(source).read_all())
                train = part.filter(pl.col("side") == TRAIN).select("pair").unique()
                test = part.filter(pl.col("side") == TEST)
                seen_rows.append(test.join(train, on="pair", how="semi", nulls_equal=True)["row"].to_numpy().copy())
                del part, train, test
        shutil.rmtree(self.folder)
        seen = np.zeros(len(side), dtype=bool)
        seen[np.concatenate(seen_rows)] = True
        return seen[test_rows]
