"""The stage contract: one pure function over one shard; the runner does the bookkeeping.

Layout of a stage folder ``<work>/<stage>/``::

    <table>/part-NNNNN.parquet     one folder per output table (readable as a dataset)
    _rejects/part-NNNNN.parquet    dropped rows: stage, shard, reason, source, record
    _stats/part-NNNNN.json         {"rows_in", "rows_out", "rejected": {reason: n}, "seconds", "cpu_seconds", "requests"}
    _done/part-NNNNN               written last; a rerun skips shards that have it

Every shard must account for every record: ``rows_in == rows_out + rejected``.
The runner refuses (raises ``AccountingError``) a result that does not add up.

In a work folder on an fsspec URL (a mirror path, ``reasonvqa.workstore``) every file written here is
also PUT to the URL, the marker last; markers, listings and reads are answered by the URL.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas, workstore
from reasonvqa.table_check import check_table


class AccountingError(RuntimeError):
    """A stage result whose rows in != rows out + rows rejected."""


@dataclass
class Rejects:
    """Collects rejected records of one shard with reason and source location.

    Rows come one at a time (``add``) or as whole tables of the REJECTS schema (``add_table``: a
    vectorized stage's rejects never become Python dicts); ``table()`` keeps the order they came in.
    """

    stage: str
    shard: int = 0
    _tables: list[pa.Table] = field(default_factory=list, repr=False)
    _pending: list[dict] = field(default_factory=list, repr=False)  # rows of ``add`` since the last table

    def add(self, reason: str, source: str, record: Any) -> None:
        """Record one dropped row. ``record`` is kept as JSON (or raw text)."""
        if isinstance(record, (bytes, bytearray)):
            record = record.decode("utf-8", "replace")
        text = record if isinstance(record, str) else json.dumps(record, default=str, sort_keys=True)
        self._pending.append(
            {"stage": self.stage, "shard": self.shard, "reason": reason, "source": source, "record": text}
        )

    def add_table(self, table: pa.Table) -> None:
        """Record every row of ``table`` (columns reason, source, record) as dropped by this stage and shard."""
        if {"stage", "shard"} & set(table.column_names):
            raise ValueError("add_table: stage and shard come from the Rejects, not from the table")
        if table.num_rows:
            n = table.num_rows
            table = table.add_column(0, "shard", pa.repeat(pa.scalar(self.shard, pa.int32()), n))
            table = table.add_column(0, "stage", pa.repeat(pa.scalar(self.stage, pa.string()), n))
            self._flush()
            self._tables.append(schemas.conform(table, schemas.REJECTS))

    def _flush(self) -> None:
        """The pending rows become a table, so the tables keep the order rows came in."""
        if self._pending:
            self._tables.append(schemas.from_rows(self._pending, schemas.REJECTS))
            self._pending = []

    @property
    def rows(self) -> list[dict]:
        """Every reject as a dict, in the order recorded (a copy: add rows with ``add``)."""
        return self.table().to_pylist()

    def reason_counts(self) -> Counter:
        """Rejects per reason."""
        counts = Counter(r["reason"] for r in self._pending)
        for table in self._tables:
            counts.update({v["values"]: v["counts"] for v in table["reason"].value_counts().to_pylist()})
        return counts

    def __len__(self) -> int:
        return len(self._pending) + sum(table.num_rows for table in self._tables)

    def table(self) -> pa.Table:
        self._flush()
        return pa.concat_tables(self._tables or [schemas.from_rows([], schemas.REJECTS)]).combine_chunks()


@dataclass
class StageResult:
    """What a stage function returns for one shard.

    ``rows_in`` counts the input records in the unit the stage documents
    (records read, candidate questions, ...); every one of them must end up
    in exactly one output row or one reject.
    ``rows_out`` defaults to the total length of ``outputs``; stages whose
    outputs fan out (one record -> several rows) set it explicitly.
    """

    outputs: dict[str, pa.Table]
    rejects: Rejects
    rows_in: int
    rows_out: int | None = None
    requests: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def counted_out(self) -> int:
        if self.rows_out is not None:
            return self.rows_out
        return sum(t.num_rows for t in self.outputs.values())


def part_name(shard: int) -> str:
    return f"part-{shard:05d}"


def is_done(stage_dir: Path, shard: int) -> bool:
    """True when the shard's completion marker exists (at the URL, for a work folder on one)."""
    return workstore.exists(stage_dir / "_done" / part_name(shard))


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write a zstd Parquet file atomically (write aside, then rename; then one PUT for a work folder URL)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd", write_statistics=True)
    os.replace(tmp, path)
    workstore.push(path)


def write_json(obj: Any, path: Path) -> None:
    """Write JSON atomically with sorted keys (deterministic bytes; then one PUT for a work folder URL)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    workstore.push(path)


def write_shard(stage_dir: Path, shard: int, result: StageResult, seconds: float = 0.0, cpu_seconds: float = 0.0) -> dict:
    """Write one shard's outputs, rejects, stats and marker; return the stats.

    Output tables named in ``schemas.TABLES`` must match their schema, nested types included
    (``SchemaMismatch`` naming stage, shard, table and column); they are written in schema order.
    """
    rows_out = result.counted_out()
    rejected = result.rejects.reason_counts()
    if result.rows_in != rows_out + len(result.rejects):
        raise AccountingError(
            f"{stage_dir.name} shard {shard}: rows_in={result.rows_in} != "
            f"rows_out={rows_out} + rejected={len(result.rejects)}"
        )
    name = part_name(shard)
    outputs = {
        table_name: check_table(table, schemas.TABLES[table_name], f"stage {stage_dir.name!r} shard {shard} table {table_name!r}")
        if table_name in schemas.TABLES else table
        for table_name, table in result.outputs.items()
    }
    for table_name, table in outputs.items():
        write_parquet(table, stage_dir / table_name / f"{name}.parquet")
    write_parquet(result.rejects.table(), stage_dir / "_rejects" / f"{name}.parquet")
    stats = {
        "stage": stage_dir.name,
        "shard": shard,
        "rows_in": result.rows_in,
        "rows_out": rows_out,
        "rejected": dict(sorted(rejected.items())),
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),  # the computing thread's CPU (not its helper threads')
        "requests": result.requests,
        **result.extra,
    }
    write_json(stats, stage_dir / "_stats" / f"{name}.json")
    write_marker(stage_dir / "_done" / name)
    return stats


def write_marker(marker: Path) -> None:
    """Write a completion marker, after everything it vouches for (pushed last to a work folder URL)."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")
    workstore.push(marker)


def run_shard(stage_dir: Path, shard: int, compute: Callable[[], StageResult]) -> dict:
    """Run ``compute`` for one shard unless its marker exists; return its stats."""
    if is_done(stage_dir, shard):
        return read_stats(stage_dir, shard)
    start, cpu_start = time.perf_counter(), time.thread_time()
    result = compute()
    return write_shard(stage_dir, shard, result, time.perf_counter() - start, time.thread_time() - cpu_start)


def run_stream(stage_dir: Path, results: Iterable[StageResult]) -> list[dict]:
    """Write each result of a streaming stage (e.g. a source read in chunks) as the next shard.

    A finished stream leaves ``_done/ALL``; a rerun then only re-reads stats.
    """
    if workstore.exists(stage_dir / "_done" / "ALL"):
        return stage_stats(stage_dir)
    clear_stage(stage_dir)
    stats = []
    start, cpu_start = time.perf_counter(), time.thread_time()
    for shard, result in enumerate(results):
        now, cpu_now = time.perf_counter(), time.thread_time()
        stats.append(write_shard(stage_dir, shard, result, now - start, cpu_now - cpu_start))
        start, cpu_start = now, cpu_now
    write_marker(stage_dir / "_done" / "ALL")
    return stats


class RereadUnit(Exception):
    """Raised by a streaming stage (``Source.read``) when the shards it yielded so far are wrong and the
    unit must be read again from the start: ``write_unit`` discards them and reads ``unit`` instead.

    Visual Genome reads its files front to back assuming image order and, on meeting a file
    that is not in that order, asks to be read again with a partitioning pass.
    """

    def __init__(self, unit: Any, reason: str) -> None:
        super().__init__(reason)
        self.unit = unit
        self.reason = reason


def write_unit(stage_dir: Path, unit: Any, read: Callable[[Any], Iterable[StageResult]]) -> list[dict]:
    """Write the shards ``read(unit)`` yields into ``stage_dir`` (``run_stream``); return their stats.

    A finished unit (``_done/ALL``) is not read again. On ``RereadUnit`` the shards written so far
    are discarded and the unit the exception names is read instead.
    """
    if workstore.exists(stage_dir / "_done" / "ALL"):
        return stage_stats(stage_dir)
    while True:
        try:
            return run_stream(stage_dir, read(unit))
        except RereadUnit as again:
            unit = again.unit


def clear_stage(stage_dir: Path) -> None:
    """Remove a stage folder's contents (used before a stream is rewritten from scratch), at its URL too."""
    workstore.remove_tree(stage_dir)


def clear_shard_scratch(path: Path) -> None:
    """Remove a shard's scratch file (e.g. its call cache) once the shard is done."""
    Path(path).unlink(missing_ok=True)


def read_stats(stage_dir: Path, shard: int) -> dict:
    path = stage_dir / "_stats" / f"{part_name(shard)}.json"
    workstore.fetch(path)
    return json.loads(path.read_text())


def stage_stats(stage_dir: Path) -> list[dict]:
    """All shard stats of a stage, in shard order."""
    return [json.loads(p.read_text()) for p in fetched(workstore.listing(stage_dir / "_stats", "part-*.json"))]


def fetched(paths: list[Path]) -> list[Path]:
    """``paths``, each present locally (fetched from the work folder URL when it is on one)."""
    workstore.fetch_all(paths)
    return paths


def summarize(stats: list[dict]) -> dict:
    """Totals over shards: rows_in, rows_out, rejected by reason, requests."""
    rejected: Counter[str] = Counter()
    for s in stats:
        rejected.update(s["rejected"])
    return {
        "shards": len(stats),
        "rows_in": sum(s["rows_in"] for s in stats),
        "rows_out": sum(s["rows_out"] for s in stats),
        "rejected": dict(sorted(rejected.items())),
        "requests": sum(s.get("requests", 0) for s in stats),
    }


def read_table(stage_dir: Path, table_name: str, schema: pa.Schema | None = None) -> pa.Table:
    """Concatenate every shard of one output table (empty table of ``schema`` if none)."""
    parts = shard_paths(stage_dir, table_name)
    if not parts:
        if schema is None:
            raise FileNotFoundError(f"no shards of table {table_name!r} under {stage_dir}")
        return schema.empty_table()
    tables = [pq.read_table(p) for p in parts]
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


def shard_paths(stage_dir: Path, table_name: str) -> list[Path]:
    """Paths of every shard of one output table, in shard order (present locally)."""
    return fetched(workstore.listing(stage_dir / table_name, "part-*.parquet"))
