"""Check a release folder: manifest, checksums, schemas, counts and question invariants."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.tasks.release.writer import MANIFEST, sha256_file


def verify_release(path: Path) -> list[str]:
    """Return the problems found in the release at ``path`` (empty list = valid)."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing manifest"]
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return [f"{manifest_path}: unreadable manifest ({exc})"]
    problems = _check_files(path, manifest)
    if problems:
        return problems  # do not parse files whose bytes are wrong
    if manifest.get("schema_version") != schemas.SCHEMA_VERSION:
        problems.append(
            f"schema version {manifest.get('schema_version')!r} != supported {schemas.SCHEMA_VERSION!r}"
        )
    tables: dict[str, pa.Table] = {}
    for split in [*manifest.get("splits", []), "pool"]:
        table, errors = _read_split(path, split)
        problems += errors
        if table is None:
            continue
        tables[split] = table
        expected = manifest.get("counts", {}).get(split)
        if expected != table.num_rows:
            problems.append(f"{split}: {table.num_rows} rows, manifest says {expected}")
        if split != "pool":
            problems += _check_questions(split, table)
    problems += _check_disjoint(tables, manifest.get("splits", []))
    return problems


def _check_files(root: Path, manifest: dict) -> list[str]:
    problems = []
    listed = manifest.get("files", {})
    for rel, meta in sorted(listed.items()):
        file = root / rel
        if not file.is_file():
            problems.append(f"{rel}: listed in manifest but missing")
        elif file.stat().st_size != meta.get("bytes"):
            problems.append(f"{rel}: size {file.stat().st_size} != {meta.get('bytes')}")
        elif sha256_file(file) != meta.get("sha256"):
            problems.append(f"{rel}: sha256 mismatch")
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    for rel in sorted(present - set(listed) - {MANIFEST}):
        problems.append(f"{rel}: file not listed in manifest")
    return problems


def _read_split(root: Path, split: str) -> tuple[pa.Table | None, list[str]]:
    parts = sorted((root / split).glob("*.parquet"))
    if not parts:
        return None, [f"{split}: no Parquet files"]
    tables, problems = [], []
    for part in parts:
        try:
            table = pq.read_table(part)
        except (pa.ArrowInvalid, OSError) as exc:
            problems.append(f"{part.relative_to(root)}: unreadable Parquet ({exc})")
            continue
        if not table.schema.equals(schemas.QUESTIONS, check_metadata=False):
            problems.append(f"{part.relative_to(root)}: schema differs from QUESTIONS {schemas.SCHEMA_VERSION}")
            continue
        tables.append(table)
    if problems:
        return None, problems
    return pa.concat_tables(tables), []


def _check_questions(split: str, table: pa.Table) -> list[str]:
    problems = []
    if pc.count_distinct(table["question_id"]).as_py() != table.num_rows:
        problems.append(f"{split}: duplicate question_id")
    answers = pc.utf8_trim_whitespace(table["answer"].fill_null(""))
    empty = pc.sum(pc.equal(pc.utf8_length(answers), 0)).as_py() or 0
    if empty:
        problems.append(f"{split}: {empty} questions with an empty answer")
    choices = pl.from_arrow(table.select(["answer", "choices"]))
    good = (
        (pl.col("choices").list.len() == 4)
        & (pl.col("choices").list.n_unique() == 4)
        & pl.col("choices").list.contains(pl.col("answer"))
    ).fill_null(False)
    bad_choices = choices.select((~good).sum()).item()
    if bad_choices:
        problems.append(f"{split}: {bad_choices} questions whose choices are not the answer + 3 distinct distractors")
    return problems


def _check_disjoint(tables: dict[str, pa.Table], splits: list[str]) -> list[str]:
    seen: dict[str, str] = {}
    problems = []
    for split in splits:
        if split not in tables:
            continue
        for image in pc.unique(tables[split]["image_id"]).to_pylist():
            if image in seen:
                problems.append(f"image {image} is in both {seen[image]} and {split}")
            seen.setdefault(image, split)
    return problems[:20]
