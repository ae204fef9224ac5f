"""Read a release folder back: manifest, splits and the pre-balancing pool."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.schemas import MANIFEST
from reasonvqa.tasks.release.embed import ReleaseImages


@dataclass
class Release:
    path: Path
    manifest: dict
    splits: dict[str, pa.Table]
    pool: pa.Table


def read_split(path: Path, split: str, schema: pa.Schema = schemas.QUESTIONS) -> pa.Table:
    """All Parquet files of one split (or record table) folder as one table of ``schema``."""
    return schemas.conform(pa.concat_tables([pq.read_table(p) for p in split_parts(path, split)]), schema)


def split_parts(path: Path, split: str) -> list[Path]:
    """The Parquet files of one split folder, in order (FileNotFoundError when there are none)."""
    parts = sorted((path / split).glob("*.parquet"))
    if not parts:
        raise FileNotFoundError(f"{path / split}: no Parquet files")
    return parts


def read_columns(path: Path, split: str, columns: list[str], schema: pa.Schema = schemas.QUESTIONS) -> pa.Table:
    """The ``columns`` of one split, of their type in ``schema``, nothing else read; a column a file lacks is all
    nulls for that file's rows (a verified release has every column)."""
    tables = []
    for part in split_parts(path, split):
        present = set(pq.read_schema(part).names)
        table = pq.read_table(part, columns=[c for c in columns if c in present])
        tables.append(pa.table({c: table[c].cast(schema.field(c).type) if c in present
                                else pa.nulls(table.num_rows, schema.field(c).type) for c in columns}))
    return pa.concat_tables(tables)


def read_rows(path: Path, split: str, keep: np.ndarray, schema: pa.Schema = schemas.QUESTIONS) -> pa.Table:
    """The rows of one split where the mask ``keep`` (one entry per row, in file order) is True, as a table of
    ``schema``; read one file at a time, so only one file's other rows are ever in memory."""
    parts = split_parts(path, split)
    sizes = [pq.ParquetFile(p).metadata.num_rows for p in parts]
    if sum(sizes) != len(keep):
        raise ValueError(f"{path / split}: {sum(sizes)} rows, the mask has {len(keep)}")
    tables, start = [], 0
    for part, size in zip(parts, sizes):
        mine = keep[start:start + size]
        start += size
        if not mine.any():  # nothing selected here: the file is not read
            continue
        table = pq.read_table(part)
        tables.append(table.filter(pa.array(mine)) if not mine.all() else table)
        del table
    if not tables:
        return schema.empty_table()
    return schemas.conform(pa.concat_tables(tables), schema)


def read_release(path: Path) -> Release:
    """Load a release written by ``write_release``."""
    manifest_file = path / MANIFEST
    if not manifest_file.is_file():
        raise FileNotFoundError(f"{manifest_file}: not a release (no manifest)")
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    splits = {s: read_split(path, s) for s in manifest["splits"]}
    return Release(path=path, manifest=manifest, splits=splits, pool=read_split(path, "pool"))


def record_tables(release: Path, manifest: dict) -> dict[str, pa.Table]:
    """The record tables (e.g. regions) a release lists in its manifest, read whole; the images table (which
    may hold the images' bytes) as a ``ReleaseImages`` that streams it when written."""
    return {name: ReleaseImages(Path(release)) if name == "images" else read_split(Path(release), name, schemas.TABLES[name])
            for name in manifest.get("tables", [])}
