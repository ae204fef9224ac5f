"""Shared helpers for the source reader tests: write literal fixtures, read a stage back."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.stage import read_table
from reasonvqa.tasks.sources.gldv2 import Gldv2Source
from reasonvqa.tasks.sources.ingest import ingest_unit

TABLES = ("images", "objects", "relations", "attributes")


def write_json(folder: Path, name: str, value) -> Path:
    """Write ``value`` as compact JSON (the released files are one-line arrays)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_text(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def rows(stage_dir: Path, table: str) -> list[dict]:
    schema = schemas.TABLES.get(table, schemas.REJECTS if table == "_rejects" else None)
    return read_table(stage_dir, table, schema).to_pylist()


def rejects_by_reason(stage_dir: Path) -> dict[str, list[str]]:
    """reason -> sorted list of source locations."""
    out: dict[str, list[str]] = {}
    for r in rows(stage_dir, "_rejects"):
        out.setdefault(r["reason"], []).append(r["source"])
    return {k: sorted(v) for k, v in sorted(out.items())}


def assert_accounted(stats: list[dict], stage_dir: Path) -> None:
    """Every shard adds up, and its stats agree with the files written."""
    for s in stats:
        assert s["rows_in"] == s["rows_out"] + sum(s["rejected"].values())
        part = f"part-{s['shard']:05d}.parquet"
        rejected = pq.read_table(stage_dir / "_rejects" / part).num_rows
        assert rejected == sum(s["rejected"].values())


def stage_bytes(stage_dir: Path) -> dict[str, bytes]:
    """Bytes of every Parquet file of a stage (stats carry timings, so they are left out)."""
    return {str(p.relative_to(stage_dir)): p.read_bytes() for p in sorted(stage_dir.rglob("*.parquet"))}


# GLDv2 files in the released format (real-looking rows; categories quoted and percent-encoded)
TRAIN = """id,url,landmark_id
6e158a47eb2ca3f6,https://upload.wikimedia.org/wikipedia/commons/b/b5/Observatoriet_v%C3%A4derkvarn_2.jpg,142820
202cd79556f30760,http://upload.wikimedia.org/wikipedia/commons/e/e7/Ecuador_Guayaquil.jpg,104169
3ad87684c99c06e1,http://upload.wikimedia.org/wikipedia/commons/2/2d/Tour_Eiffel.jpg,37914
e7f70e9c61e66bfd,https://upload.wikimedia.org/wikipedia/commons/7/7b/Eiffel.jpg,37914
"""
CATEGORIES = """landmark_id,category
142820,http://commons.wikimedia.org/wiki/Category:Observatoriet_v%C3%A4derkvarn
104169,"http://commons.wikimedia.org/wiki/Category:Guayaquil,_Ecuador"
37914,https://commons.wikimedia.org/wiki/Category:Eiffel_Tower
"""
CLEAN = """landmark_id,images
37914,3ad87684c99c06e1 0123456789abcdef
"""


def gldv2_folder(tmp_path, train=TRAIN, categories=CATEGORIES, clean=CLEAN, split="train.csv"):
    """A GLDv2 folder of literal files (None leaves a side file out)."""
    src = tmp_path / "src"
    write_text(src, split, train)
    if categories is not None:
        write_text(src, "train_label_to_category.csv", categories)
    if clean is not None:
        write_text(src, "train_clean.csv", clean)
    return src


def read_gldv2_folder(path: Path, stage_dir: Path, shard_size: int = 5000, max_images: int | None = None) -> list[dict]:
    """Read a GLDv2 folder into ``stage_dir`` as the build does (``ingest_unit`` of each planned unit); the stats."""
    source = Gldv2Source()
    config = source.config_model(kind=source.kind, path=Path(path), max_images=max_images)
    return [stats for unit in source.plan(config, shard_size)
            for stats in ingest_unit(source, config, unit, Path(stage_dir), shard_size)]


VG_FILES = ("image_data.json", "objects.json", "attributes.json", "relationships.json")


@pytest.fixture(scope="session")
def vg_sample(tmp_path_factory) -> Path:
    """The bundled sample's first five images (ids 1-5, the Visual Genome v1.2 records, unchanged), in
    the bundled files' JSON style: the reader tests pin their values. The whole 50-image sample is
    checked by tests/tasks/sources/test_scan.py::test_scan_the_whole_vg_sample."""
    folder = tmp_path_factory.mktemp("vg_sample")
    for name in VG_FILES:
        records = json.loads((SAMPLE_DIR / "vg" / name).read_text(encoding="utf-8"))
        write_json(folder, name, [r for r in records if r["image_id"] <= 5])
    return folder
