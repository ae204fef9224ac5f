"""``reasonvqa sources scan``: read a source into a temporary folder and summarize it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from reasonvqa.stage import shard_paths, summarize
from reasonvqa.tasks.sources.gldv2 import ingest_gldv2
from reasonvqa.tasks.sources.vg import ingest_vg

READERS = {"vg": ingest_vg, "gldv2": ingest_gldv2}
TABLES = ("images", "objects", "relations", "attributes")


def scan_source(kind: str, path: Path, shard_size: int = 5000) -> dict:
    """Ingest source ``kind`` ("vg" or "gldv2") from ``path``; return row counts and rejects by reason.

    Returns ``{"source", "path", "images", "objects", "relations", "attributes",
    "rejected": {reason: n}, "shards"}``; nothing is kept on disk.
    """
    if kind not in READERS:
        raise ValueError(f"unknown source kind {kind!r}; expected one of {sorted(READERS)}")
    with tempfile.TemporaryDirectory(prefix=f"reasonvqa-scan-{kind}-") as tmp:
        stage_dir = Path(tmp) / f"sources_{kind}"
        stats = READERS[kind](Path(path), stage_dir, shard_size=shard_size)
        counts = {t: sum(pq.ParquetFile(p).metadata.num_rows for p in shard_paths(stage_dir, t)) for t in TABLES}
    totals = summarize(stats)
    return {"source": kind, "path": str(path), **counts, "rejected": totals["rejected"], "shards": totals["shards"]}
