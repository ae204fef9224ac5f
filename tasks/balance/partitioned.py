"""Balance, split and write a release from a pool kept on disk (pools larger than memory).

``pipeline.plan_release`` holds the whole pool in memory (about 270 bytes per question of the
synthetic pool: 11 GB at 42 M questions). Here the pool stays in its Parquet files:

1. Decide on the key columns only (question_id, image_id, property_id, answer, n_hop, and the
   ``balance.no_choices`` flag read file by file from the choices column): the same
   ``pipeline.decide`` on integer codes as in memory. The seen-in-train check compares the
   (question, answer) strings inside hash partitions spilled to disk, one partition in memory at
   a time (exact: equal pairs always land in the same partition).
2. Spill: the pool is streamed in record batches; each row goes, with its rank in question_id
   order and its destination (train, test, removed), to the spill file of the pool part file it
   belongs to (rank // ROWS_PER_FILE), as uncompressed Arrow IPC.
3. Write: ``SpilledRows`` sources read one spill part at a time (memory-mapped), order it by
   rank and give ``write_release`` the pool's, train's and test's rows together, the part gathered
   once (``joint_chunks``), so the release files are byte-identical to the in-memory path's (tested).

Statistics (``stats.write_stats``) are counted one spill part at a time (``SpilledRows.part_views``):
counts added up, images counted on integer codes spilled with the rows, the bias report's question
prior grouped in hash buckets of the question texts on disk; so memory grows with the pool only by the
decision's arrays and the most-frequent-choice baseline's choice codes (about 16 bytes per released
question plus each part's dictionary of choice texts, kept until every part is counted).
"""

from __future__ import annotations

import shutil
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa.codes import combined, take_rows
from reasonvqa.gathered import gather_rows
from reasonvqa.row_views import ROWS_PER_FILE
from reasonvqa.rows import row_dtype, row_numbers
from reasonvqa.tasks.balance.balance import NO_CHOICES, no_choices
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.groups import FORM, with_forms
from reasonvqa.tasks.balance.pipeline import BalancedSplit, decide, question_answer_pairs

KEY_COLUMNS = ["question_id", "image_id", "property_id", "answer", "n_hop"]
# read when the pool files have them (pipeline.decide); template_ids becomes groups.FORM file by file
KIND_COLUMNS = ["kind", "task_type", "is_hallucination", "absence_basis", "template_ids"]
BATCH_ROWS = 262_144  # rows per record batch streamed from the pool files
PAIR_PARTITIONS = 16
STATS_ROWS = 262_144  # rows the statistics count at a time (their working memory is a few times this)
INPUT_ROWS_PER_FILE = 1_000_000  # rows per Parquet file when an in-memory pool is written out
REMOVED, TRAIN, TEST = 0, 1, 2
RANK, DEST, IMAGE = "__rank", "__dest", "__image"  # IMAGE: the image_id's integer code (-1: null)
T = TypeVar("T")


def read_columns(paths: list[Path], columns: list[str]) -> pa.Table:
    """``columns`` of every pool file, concatenated in file order, one chunk per column; with a choices column in
    ``columns``, each file's choices are read into ``balance.no_choices`` flags (column NO_CHOICES) instead.

    The columns are joined one at a time, each file's chunks of a column released once it is joined: a copy of
    one column at a time, not of the whole table (``combine_chunks`` held the read chunks and the joined copy)."""
    parts = [_flagged(pq.read_table(path, columns=columns)) for path in paths]
    schema = pa.concat_tables([part.slice(0, 0) for part in parts]).schema
    joined = []
    for name in schema.names:
        joined.append(combined(pa.chunked_array([chunk for part in parts for chunk in part[name].chunks],
                                                schema.field(name).type)))
        parts = [part.drop_columns([name]) for part in parts]
    return pa.Table.from_arrays(joined, schema=schema)


def _without_unused_kinds(keys: pa.Table) -> pa.Table:
    """``keys`` without KIND_COLUMNS when no row has a kind (templated rows of a 1.x pool): ``decide`` then finds no
    group key to fill and no hallucination share to apply, as without the columns, which cost 4 bytes or more per
    row each (an all-null string column keeps its offsets)."""
    if "kind" in keys.column_names and keys["kind"].null_count == keys.num_rows:
        return keys.drop_columns([c for c in [*KIND_COLUMNS, FORM] if c in keys.column_names])
    return keys


def _flagged(table: pa.Table) -> pa.Table:
    """``table`` with its choices column (if any) replaced by the NO_CHOICES flags (a bit per row, not the lists)
    and its template_ids by the rows' forms (``groups.with_forms``: a string for non-template rows only)."""
    table = with_forms(table)
    if "choices" not in table.column_names:
        return table
    return table.append_column(NO_CHOICES, no_choices(table)).drop_columns(["choices"])


def stream(path: Path, columns: list[str] | None = None) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first row number within the file, batch) over one pool file."""
    start = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=columns):
        yield start, batch
        start += batch.num_rows


Mapper = Callable[[Callable, list[tuple]], list]  # (function, argument tuples) -> results in call order


def in_process(fn: Callable, calls: list[tuple]) -> list:
    """The default ``Mapper``: run the calls one after another here."""
    return [fn(*args) for args in calls]


def file_starts(paths: list[Path]) -> np.ndarray:
    """First global row number of each pool file, then the total row count."""
    counts = [pq.ParquetFile(p).metadata.num_rows for p in paths]
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)


def write_pool_files(pool: pa.Table, folder: Path) -> list[Path]:
    """Write an in-memory ``pool`` as Parquet files of INPUT_ROWS_PER_FILE rows under ``folder`` (emptied
    first), in row order: the input of ``plan_partitioned`` for a pool that was built in memory."""
    rows_per_file = INPUT_ROWS_PER_FILE
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    paths = []
    for k, start in enumerate(range(0, max(pool.num_rows, 1), rows_per_file)):
        paths.append(folder / f"pool-{k:05d}.parquet")
        pq.write_table(pool.slice(start, rows_per_file), paths[-1])
    return paths


def plan_partitioned(paths: list[Path], balance: BalanceConfig, split: SplitConfig, seed: int, work_dir: Path,
                     rows_per_file: int | None = None, run: Mapper = in_process,
                     groups: pa.Table | None = None) -> BalancedSplit:
    """``plan_release`` for a pool in Parquet ``paths`` (rows in file order), spilling under ``work_dir``.

    Returns sources for ``write_stats`` and ``write_release``: ``pool``, ``split.train`` and
    ``split.test`` are ``SpilledRows`` (``part_views`` gives the statistics each spill part's rows). The per-file and per-partition steps
    (``spill_file``, ``bucket_pairs``, ``seen_in_bucket``) go through ``run``: a flow passes one that
    submits them as tasks to its task runner (threads or Dask workers; same files either way).
    ``rows_per_file`` (default: the writer's) sizes the spill's parts; any size gives the same release.
    ``groups``: the image groups kept in one split (``image_groups``).
    """
    if not paths:
        raise ValueError("plan_partitioned got no pool file (an empty pool is one empty file of the pool's schema)")
    rows_per_file = rows_per_file or ROWS_PER_FILE
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    present = set(pq.read_schema(paths[0]).names)
    keys = _without_unused_kinds(read_columns(paths, KEY_COLUMNS + [c for c in KIND_COLUMNS + ["choices"] if c in present]))
    starts = file_starts(paths)
    seen = _SeenInTrain(paths, starts, work_dir / "pairs", run)
    # the decision's image codes (-1 for null): the statistics count images per part on them
    balanced, result = decide(keys, balance, split, seed, seen_in_train=seen, keep_codes=("image_id",), groups=groups)
    del keys
    # decide fills these (keep_codes asked for the image codes)
    assert balanced.pool_codes is not None and balanced.question_id_order is not None
    assert result.train_rows is not None and result.test_rows is not None
    order = balanced.question_id_order
    (image, distinct), balanced.pool_codes = balanced.pool_codes["image_id"], None
    n_images = len(distinct)
    del distinct
    n = len(order)
    rank = np.empty(n, dtype=row_dtype(n))  # spilled as the __rank column (int32 below 2^31 rows)
    rank[order] = row_numbers(n)
    dest = np.zeros(n, dtype=np.int8)
    dest[result.train_rows] = TRAIN
    dest[result.test_rows] = TEST
    spill = _spill(paths, starts, rank, dest, image, work_dir / "pool", rows_per_file, run)
    spill.images, spill.scratch = n_images, work_dir
    del rank, dest, image
    result.train = SpilledRows(spill, TRAIN, len(result.train_rows))
    result.test = SpilledRows(spill, TEST, len(result.test_rows))
    pool = SpilledRows(spill, None, n)
    return BalancedSplit(pool=pool, balance=balanced, split=result)


@dataclass
class _Spill:
    files: list[Path]  # pool part k's rows, unordered, with RANK, DEST and IMAGE columns
    schema: pa.Schema  # the pool's own columns
    images: int = 0  # distinct image codes
    scratch: Path | None = None  # a folder the statistics may spill into


def _spill(paths: list[Path], starts: np.ndarray, rank: np.ndarray, dest: np.ndarray, image: np.ndarray,
           folder: Path, rows_per_file: int, run: Mapper) -> _Spill:
    """Spill every pool file (one ``spill_file`` call each) into the folders of the pool parts."""
    n_parts = max(1, -(-len(rank) // rows_per_file))
    parts = [folder / f"{k:05d}" for k in range(n_parts)]
    for part in parts:
        part.mkdir(parents=True)
    calls = [(path, i, rank[starts[i]:starts[i + 1]], dest[starts[i]:starts[i + 1]], image[starts[i]:starts[i + 1]],
              folder, rows_per_file) for i, path in enumerate(paths)]
    run(spill_file, calls)
    schema = pq.read_schema(paths[0]).remove_metadata()
    return _Spill(files=parts, schema=schema)


def spill_file(path: Path, index: int, rank: np.ndarray, dest: np.ndarray, image: np.ndarray, folder: Path,
               rows_per_file: int) -> int:
    """Stream pool file number ``index`` (its rows' ``rank``, ``dest`` and ``image`` code) into ``<folder>/<part>/<index>.arrow``,
    part = rank // rows_per_file, as uncompressed Arrow IPC; return its row count."""
    writers = {}
    try:
        for start, batch in stream(path):
            rows = np.arange(start, start + batch.num_rows)
            part = rank[rows] // rows_per_file
            by_part = np.argsort(part, kind="stable")
            bounds = np.searchsorted(part[by_part], np.arange(part.max(initial=0) + 2))
            batch = (batch.append_column(RANK, pa.array(rank[rows])).append_column(DEST, pa.array(dest[rows]))
                     .append_column(IMAGE, pa.array(image[rows])))
            for k in np.flatnonzero(np.diff(bounds)).tolist():
                piece = batch.take(pa.array(by_part[bounds[k]:bounds[k + 1]]))
                if k not in writers:
                    writers[k] = pa.ipc.new_file(folder / f"{k:05d}" / f"{index:05d}.arrow", piece.schema)
                writers[k].write_batch(piece)
    finally:
        for writer in writers.values():
            writer.close()
    return len(rank)


class SpilledRows:
    """The pool's (``dest`` None), train's or test's rows in question_id order, read from the spill
    one pool part at a time (a ``RowSource`` for ``write_release``)."""

    def __init__(self, spill: _Spill, dest: int | None, num_rows: int):
        self.spill, self.dest, self.num_rows = spill, dest, num_rows

    @property
    def images(self) -> int:
        return self.spill.images

    @property
    def joint(self) -> _Spill:
        """The spill: the pool's, train's and test's rows are written in one pass over it (``joint_chunks``)."""
        return self.spill

    @property
    def schema(self) -> pa.Schema:
        return self.spill.schema

    def joint_chunks(self, sources: list["SpilledRows"], threads: Executor) -> Iterator[list[pa.Table]]:
        """Per pool part in order: each of ``sources``' rows in it by rank. The part is read, ordered and
        gathered once (one task per column on ``threads``), each source's rows taken out of that
        (``gathered.gather_rows``), where writing each source on its own reads the spill once per source."""
        def gather(table: pa.Table, order: np.ndarray, dest: np.ndarray) -> list[pa.Table]:
            within = [None if source.dest is None else np.flatnonzero(dest == source.dest) for source in sources]
            return gather_rows(table, order, within, threads)

        return self._by_rank(self.spill.schema.names, gather)

    @property
    def scratch(self) -> Path | None:
        return self.spill.scratch

    def select(self, columns: list[str]) -> pa.Table:
        """``columns`` of these rows, materialized."""
        pieces = list(self._pieces(columns))
        return pa.concat_tables(pieces).combine_chunks() if pieces else self.spill.schema.empty_table().select(columns)

    def part_views(self, columns: list[str]) -> Iterator[tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]]:
        """Per slice of at most STATS_ROWS rows of a spill part (all destinations, in no particular order):
        (its ``columns``, image code per row, train rows, test rows), for statistics that add up over parts; one
        empty slice when the pool has no row, so they count an empty pool as the in-memory path does."""
        counted = 0
        for part in self.spill.files:
            with _mapped(part, columns + [DEST, IMAGE]) as table:
                if table is None:
                    continue
                for start in range(0, table.num_rows, STATS_ROWS):
                    # copied out of the maps; taken from the slice, so a part of many chunks (one per
                    # shard file) is not concatenated whole for each slice
                    part_slice = table.slice(start, STATS_ROWS)
                    piece = take_rows(part_slice, np.arange(part_slice.num_rows)).combine_chunks()
                    dest = piece[DEST].to_numpy()
                    counted += piece.num_rows
                    yield (piece.select(columns), piece[IMAGE].to_numpy(), np.flatnonzero(dest == TRAIN),
                           np.flatnonzero(dest == TEST))
        if not counted:
            none = np.zeros(0, np.int64)
            yield self.spill.schema.empty_table().select(columns), none.astype(np.int32), none, none

    def slices(self, columns: list[str], size: int) -> Iterator[pa.Table]:
        """``columns`` of these rows in question_id order, at most ``size`` rows at a time (one spill part read at a time)."""
        for piece in self._pieces(columns):
            yield from (piece.slice(start, size) for start in range(0, piece.num_rows, size))

    def chunks(self, size: int) -> Iterator[pa.Table]:
        """These rows in question_id order, ``size`` at a time (the last chunk shorter; one empty table when
        there are no rows), read one spill part at a time."""
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
        """Per pool part in order: its rows of this destination, by rank, only ``columns``."""
        def take(table: pa.Table, order: np.ndarray, dest: np.ndarray) -> pa.Table:
            return take_rows(table, order if self.dest is None else order[dest == self.dest]).combine_chunks()

        return self._by_rank(columns, take)

    def _by_rank(self, columns: list[str], cut: Callable[[pa.Table, np.ndarray, np.ndarray], T]) -> Iterator[T]:
        """Per pool part in order: ``cut(its columns, its rows' order by rank, their destinations in that
        order)``, which must copy what it keeps out of the part (memory-mapped only while ``cut`` runs)."""
        for part in self.spill.files:
            with _mapped(part, columns + [RANK, DEST]) as table:
                if table is None:
                    continue
                order = np.argsort(table[RANK].to_numpy(), kind="stable")
                out = cut(table.select(columns), order, table[DEST].to_numpy()[order])
                del table
            yield out  # after the part's maps are closed


@contextmanager
def _mapped(part: Path, columns: list[str]) -> Iterator[pa.Table | None]:
    """``columns`` of every spill file of one part, memory-mapped while the block runs (None: no file)."""
    sources = [pa.memory_map(str(f)) for f in sorted(part.glob("*.arrow"))]
    try:
        yield pa.concat_tables([pa.ipc.open_file(s).read_all().select(columns) for s in sources]) if sources else None
    finally:
        for source in sources:
            source.close()


class _SeenInTrain:
    """The seen-in-train check over hash partitions of the (question, answer) strings on disk: each pool
    file is bucketed (``bucket_pairs``), then each bucket joins its test pairs to its train pairs
    (``seen_in_bucket``). Exact: equal pairs always land in the same bucket."""

    def __init__(self, paths: list[Path], starts: np.ndarray, folder: Path, run: Mapper,
                 partitions: int = PAIR_PARTITIONS):
        self.paths, self.starts, self.folder, self.run, self.partitions = paths, starts, folder, run, partitions

    def __call__(self, test_rows: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
        side = np.zeros(int(self.starts[-1]), dtype=np.int8)
        side[train_rows], side[test_rows] = TRAIN, TEST
        buckets = [self.folder / f"{k:03d}" for k in range(self.partitions)]
        for bucket in buckets:
            bucket.mkdir(parents=True)
        s = self.starts
        self.run(bucket_pairs, [(path, i, int(s[i]), side[s[i]:s[i + 1]], self.folder, self.partitions)
                                for i, path in enumerate(self.paths)])
        seen_rows = self.run(seen_in_bucket, [(bucket,) for bucket in buckets])
        shutil.rmtree(self.folder)
        seen = np.zeros(len(side), dtype=bool)
        seen[np.concatenate(seen_rows)] = True
        return seen[test_rows]


PAIRS_SCHEMA = pa.schema([("row", pa.int64()), ("side", pa.int8()), ("pair", pa.large_string())])


def bucket_pairs(path: Path, index: int, first_row: int, side: np.ndarray, folder: Path, partitions: int) -> int:
    """Write the (question, answer) pairs of pool file ``index``'s train and test rows (``side``) into
    ``<folder>/<bucket>/<index>.arrow`` by hash of the pair; rows are global (``first_row`` on)."""
    writers = [pa.ipc.new_file(folder / f"{k:03d}" / f"{index:05d}.arrow", PAIRS_SCHEMA) for k in range(partitions)]
    try:
        for start, batch in stream(path, ["question", "answer"]):
            mine = side[start:start + batch.num_rows] > 0
            rows = np.arange(first_row + start, first_row + start + batch.num_rows)[mine]
            pairs = pl.Series(question_answer_pairs(pa.Table.from_batches([batch]).filter(pa.array(mine))))
            bucket = (pairs.hash(seed=0) % partitions).to_numpy()
            chunk = pa.table({"row": rows, "side": side[start:start + batch.num_rows][mine],
                              "pair": pairs.to_arrow().cast(pa.large_string())}, schema=PAIRS_SCHEMA)
            for k in range(partitions):
                writers[k].write_table(chunk.filter(pa.array(bucket == k)))
    finally:
        for writer in writers:
            writer.close()
    return len(side)


def seen_in_bucket(bucket: Path) -> np.ndarray:
    """Global row numbers of the test rows of one bucket whose pair occurs among its train rows."""
    sources = [pa.memory_map(str(f)) for f in sorted(bucket.glob("*.arrow"))]
    try:
        tables = [pa.ipc.open_file(source).read_all() for source in sources]
        part = cast(pl.DataFrame, pl.from_arrow(pa.concat_tables(tables) if tables else PAIRS_SCHEMA.empty_table()))
        train = part.filter(pl.col("side") == TRAIN).select("pair").unique()
        test = part.filter(pl.col("side") == TEST)
        return test.join(train, on="pair", how="semi", nulls_equal=True)["row"].to_numpy().astype(np.int64, copy=True)
    finally:
        for source in sources:
            source.close()
