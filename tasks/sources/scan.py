"""``reasonvqa sources scan``: read a source into a temporary folder and summarize it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from reasonvqa import sources
from reasonvqa.stage import shard_paths, summarize
from reasonvqa.tasks.sources.ingest import ingest_unit, source_stage_dir, unit_dir


def scan_source(kind: str, path: Path, shard_size: int = 5000) -> dict:
    """Read every unit of the registered source ``kind`` from ``path``; return row counts and rejects by reason.

    Returns ``{"source", "path", <one count per table of sources.SOURCE_TABLES>,
    "rejected": {reason: n}, "shards"}``; nothing is kept on disk. An unknown kind raises
    ``UnknownSourceError`` (a ValueError) listing the known kinds.
    """
    sources.source_class(kind)  # an unknown kind: one line listing the known ones
    config = sources.parse_config({"kind": kind, "path": Path(path)})
    with tempfile.TemporaryDirectory(prefix=f"reasonvqa-scan-{kind}-") as tmp:
        source_dir = source_stage_dir(Path(tmp), kind)
        source = sources.get(kind, scratch_dir=source_dir)
        source.check(config)
        stats: list[dict] = []
        counts = dict.fromkeys(sources.SOURCE_TABLES, 0)
        for index, unit in enumerate(source.plan(config, shard_size)):
            stage_dir = unit_dir(source_dir, index)
            stats += ingest_unit(source, config, unit, stage_dir, shard_size)
            for table in counts:
                counts[table] += sum(pq.ParquetFile(p).metadata.num_rows for p in shard_paths(stage_dir, table))
    totals = summarize(stats)
    return {"source": kind, "path": str(path), **counts, "rejected": totals["rejected"], "shards": totals["shards"]}
