"""Read a release folder back: manifest, splits and the pre-balancing pool."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.tasks.release.writer import MANIFEST


@dataclass
class Release:
    path: Path
    manifest: dict
    splits: dict[str, pa.Table]
    pool: pa.Table


def read_split(path: Path, split: str, schema: pa.Schema = schemas.QUESTIONS) -> pa.Table:
    """All Parquet files of one split (or record table) folder as one table of ``schema``."""
    parts = sorted((path / split).glob("*.parquet"))
    if not parts:
        raise FileNotFoundError(f"{path / split}: no Parquet files")
    return schemas.conform(pa.concat_tables([pq.read_table(p) for p in parts]), schema)


def read_release(path: Path) -> Release:
    """Load a release written by ``write_release``."""
    manifest_file = path / MANIFEST
    if not manifest_file.is_file():
        raise FileNotFoundError(f"{manifest_file}: not a release (no manifest)")
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    splits = {s: read_split(path, s) for s in manifest["splits"]}
    return Release(path=path, manifest=manifest, splits=splits, pool=read_split(path, "pool"))
