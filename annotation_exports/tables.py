"""Read the record tables an annotation batch is drawn from: a release folder or a stage output.

The source is a folder or an fsspec URL (a work folder on s3://, read through ``reasonvqa.work_files``).
A release (``manifest.json`` beside it) gives its pre-balancing ``pool/`` as the questions and
its record tables (``regions/``, ``images/``) where it has them. Any other folder is read as
stage output: every ``<table>/part-*.parquet`` below it (hidden and ``_`` folders skipped).
Columns that a table may lack (task_type, hallucination flags, evidence region ids) are read
when present and treated as null otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import storage
from reasonvqa.schemas import MANIFEST
from reasonvqa.stage import fetched, shard_paths
from reasonvqa.work_files import drop_local_copies, files_below, present, subfolders


@dataclass
class SourceTables:
    """Questions, regions and images of one release or stage folder (None where absent)."""

    root: Path
    kind: str  # "release" or "stage"
    questions: pa.Table | None
    regions: pa.Table | None
    images: pa.Table | None
    identity: dict = field(default_factory=dict)  # release name/version, or the stage folder name


def source_root(source: str | Path) -> Path:
    """The folder to read ``source`` from: a path as it is; an fsspec URL (a build's work folder, a
    release uploaded to s3://) as this process's mirror of it, whose files are fetched as they are read."""
    if isinstance(source, str) and storage.protocol(source):
        return storage.work_folder(source.rstrip("/"))
    return Path(source)


def _parts(root: Path, table: str) -> list[Path]:
    found = []
    for path in files_below(root, f"{table}/part-*.parquet"):
        rel = path.relative_to(root).parts[:-2]
        if not any(p.startswith((".", "_")) for p in rel):
            found.append(path)
    return fetched(found)


def _read(paths: list[Path]) -> pa.Table | None:
    if not paths:
        return None
    tables = [pq.ParquetFile(p).read() for p in paths]  # read_table would import pyarrow.dataset and pandas
    return pa.concat_tables(tables, promote_options="default")


def read_source_tables(source: str | Path) -> SourceTables:
    """The tables of a release (questions = its pool) or of a stage output folder, a path or an fsspec URL."""
    root = source_root(source)
    try:
        return _source_tables(source, root)
    finally:
        drop_local_copies(root)  # a URL: the copies fetched into this read's mirror (the tables are in memory)


def _source_tables(source: str | Path, root: Path) -> SourceTables:
    if not (root.is_dir() or subfolders(root, "")):
        raise FileNotFoundError(f"{source}: not a folder (give a release or stage output folder)")
    manifest_path = root / MANIFEST
    if present(manifest_path) and manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        tables = set(manifest.get("tables", []))
        return SourceTables(
            root=root, kind="release",
            questions=_read(shard_paths(root, "pool")),
            regions=_read(shard_paths(root, "regions")) if "regions" in tables else None,
            images=_read(shard_paths(root, "images")) if "images" in tables else None,
            identity={"name": manifest.get("name"), "version": manifest.get("version"),
                      "config_hash": manifest.get("config_hash")},
        )
    return SourceTables(root=root, kind="stage", questions=_read(_parts(root, "questions")),
                        regions=_read(_parts(root, "regions")), images=_read(_parts(root, "images")),
                        identity={"folder": root.name})


def column(table: pa.Table, *names: str) -> list | None:
    """The first of ``names`` that ``table`` has, as a Python list; None when it has none of them."""
    for name in names:
        if name in table.column_names:
            return table[name].to_pylist()
    return None
