"""Run a registry source's plan/read through the shard writer, as the build flow does, for tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from reasonvqa.sources import Source, SourceConfig
from reasonvqa.stage import shard_paths, stage_stats, summarize, write_shard


def run_source(source: Source, config: SourceConfig, stage_dir: Path, shard_size: int = 1000) -> list[dict]:
    """Write every shard of every unit of ``source`` under ``stage_dir``; return the shard stats."""
    stats = []
    for unit in source.plan(config, shard_size):
        for result in source.read(config, unit, shard_size):
            stats.append(write_shard(stage_dir, len(stats), result))
    return stats


def table_counts(stage_dir: Path, tables: tuple[str, ...] = ("images", "regions", "objects")) -> dict:
    """Rows per output table, plus rejects by reason and the shard count."""
    counts = {t: sum(pq.ParquetFile(p).metadata.num_rows for p in shard_paths(stage_dir, t)) for t in tables}
    totals = summarize(stage_stats(stage_dir))
    return {**counts, "rejected": totals["rejected"], "shards": totals["shards"]}
