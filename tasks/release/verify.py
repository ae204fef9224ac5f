"""Check a release folder: manifest, checksums, schemas, counts and question invariants."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, cast

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.absence_bases import BASES
from reasonvqa.schemas import MULTIPLE_CHOICE_KINDS
from reasonvqa.tasks.release.paths import ReleasePathError, check_release_name, check_release_version
from reasonvqa.tasks.release.verify_knowledge import check_knowledge
from reasonvqa.tasks.release.verify_regions import EvidenceTally, check_regions
from reasonvqa.tasks.release.writer import (
    CARD, MANIFEST, MANIFEST_DIGEST, config_digest, content_hash, digest_line, manifest_bytes, sha256_file,
)


_SPLIT_PART = re.compile(r"[^/]+/part-\d{5}\.parquet")
_MANIFEST_KEYS = {"name", "version", "schema_version", "splits", "counts", "config", "config_hash", "inputs", "files"}


@dataclass
class ReleaseFiles:
    """What a release folder holds, read from the files themselves (never from the manifest)."""

    files: dict[str, dict[str, object]]  # relative path -> {"sha256", "bytes"}, regular files only
    links: list[str]  # symlinks (files or folders), which a release never holds
    rows: dict[str, int | None]  # top-level folder -> Parquet rows (None: a part is unreadable)
    card: str | None = None  # README.md, whose provenance lines repeat the manifest's


def scan_release(root: Path) -> ReleaseFiles:
    """Checksums of every regular file, symlinks found, and Parquet row counts per top-level folder."""
    files: dict[str, dict[str, object]] = {}
    links: list[str] = []
    rows: dict[str, int | None] = {}
    for folder, dirs, names in os.walk(root):
        base = Path(folder)
        for name in sorted(dirs + names):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                links.append(rel)
            elif path.is_file():
                files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
                if _SPLIT_PART.fullmatch(rel):  # <split>/part-NNNNN.parquet, as the writer names them
                    top = rel.split("/", 1)[0]
                    rows[top] = _add(rows.get(top, 0), _parquet_rows(path))
        dirs[:] = [d for d in dirs if not (base / d).is_symlink()]
    card = root / CARD
    text = card.read_text(encoding="utf-8", errors="replace") if CARD in files else None
    return ReleaseFiles(files=files, links=sorted(links), rows=rows, card=text)


def _parquet_rows(path: Path) -> int | None:
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowInvalid, OSError):
        return None


def _add(total: int | None, n: int | None) -> int | None:
    return None if total is None or n is None else total + n


def verify_release(path: Path, *, published_as: Path | None = None) -> list[str]:
    """Return the problems found in the release at ``path`` (empty list = valid).

    ``published_as``: the folder a staged release (``path``) will be renamed to; its name and
    version are checked against that folder's."""
    path = Path(path)
    manifest_path = path / MANIFEST
    if path.is_symlink() or manifest_path.is_symlink():
        return [f"{path}: a release folder and its manifest must not be symlinks"]
    if not manifest_path.is_file():
        return [f"{manifest_path}: missing manifest"]
    found = scan_release(path)
    if found.links:
        return [f"{rel}: symlink in a release (refused)" for rel in found.links]
    raw = manifest_path.read_bytes()
    problems = check_digest(path, raw) + check_manifest(raw, path, found, published_as)
    if problems:
        return problems  # do not parse files whose bytes or listing are wrong
    manifest = json.loads(raw)
    # the record tables first: the questions' evidence is checked against regions while each split is at hand
    record_problems: list[str] = []
    records: dict[str, pa.Table] = {}
    for name in manifest.get("tables", []):
        if name == "images":  # streamed file by file: it may hold the images' bytes
            from reasonvqa.tasks.release.verify_images import check_images

            record_problems += check_images(path, manifest)
            continue
        records[name], errors = _read_split(path, name, schemas.TABLES[name])
        record_problems += errors
    regions, listed = records.get("regions"), "regions" in manifest.get("tables", [])
    evidence: dict[str, list[str]] = {}
    images: dict[str, pa.Array] = {}
    for split in [*manifest["splits"], "pool"]:  # one part of one split in memory at a time
        questions = _QuestionChecks() if split != "pool" else None
        tally = EvidenceTally() if not (listed and regions is None) else None  # unreadable regions: already reported

        def check(part: pa.Table) -> None:  # called only within this pass of the loop
            if questions is not None:  # noqa: B023
                questions.add(part)  # noqa: B023
            if tally is not None:  # noqa: B023
                tally.add(part, regions)  # noqa: B023

        errors = _each_part(path, split, schemas.QUESTIONS, check)
        problems += errors
        if errors:  # a split with an unreadable part is not checked further
            continue
        if questions is not None:
            problems += questions.problems(split)
            if questions.rows == 0 and not empty_splits_allowed(manifest):
                problems.append(f"{split}: empty split (0 questions; datasets.load_dataset cannot load it, and only a "
                                "re-split given --allow-empty may publish one, recorded as config.resplit.allow_empty)")
            images[split] = questions.images()
        if tally is not None:
            evidence[split] = tally.problems(split)
    problems += _check_disjoint(images, manifest["splits"]) + record_problems
    if "images" in manifest.get("tables", []):
        problems += _check_groups_disjoint(path, images, manifest["splits"])
    if regions is not None:
        problems += check_regions(regions)
    problems += check_knowledge(path, manifest, records)
    return problems + [problem for split in sorted(evidence) for problem in evidence[split]]


def empty_splits_allowed(manifest: dict) -> bool:
    """True when the release was published with empty splits allowed (``reasonvqa resplit --allow-empty``)."""
    resplit = manifest.get("config", {}).get("resplit")
    return isinstance(resplit, dict) and resplit.get("allow_empty") is True


def check_digest(root: Path, manifest: bytes) -> list[str]:
    """The manifest's sha256 must match the digest file written beside it."""
    digest_path = root / MANIFEST_DIGEST
    if digest_path.is_symlink() or not digest_path.is_file():
        return [f"{MANIFEST_DIGEST}: missing (the manifest cannot be checked)"]
    if digest_path.read_bytes() != digest_line(manifest).encode():
        return [f"{MANIFEST}: sha256 does not match {MANIFEST_DIGEST}"]
    return []


def check_manifest(raw: bytes, root: Path, found: ReleaseFiles, published_as: Path | None = None) -> list[str]:
    """Every figure in the manifest bytes ``raw`` that can be recomputed, recomputed and compared.

    Name and version from the folder path, the config hash from the config, files (listing,
    sizes, sha256) from ``found``, splits from the folders that hold Parquet, counts from
    the Parquet files; the bytes must be the writer's canonical JSON, so no edit hides in
    formatting.
    """
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return [f"{MANIFEST}: unreadable ({exc})"]
    if not isinstance(manifest, dict) or set(manifest) - {"tables", "annotations", "content_hash", "images"} != _MANIFEST_KEYS:
        keys = sorted(manifest) if isinstance(manifest, dict) else type(manifest).__name__
        return [f"{MANIFEST}: keys {keys} are not {sorted(_MANIFEST_KEYS)}"]
    problems = [] if raw == manifest_bytes(manifest) else [f"{MANIFEST}: not in the writer's canonical JSON form"]
    problems += _check_identity(manifest, published_as or root)
    problems += _check_config(manifest)
    if not isinstance(manifest["inputs"], dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in manifest["inputs"].items()
    ):
        problems.append(f"{MANIFEST}: inputs is not a map of names to snapshot ids")
    problems += _check_files(manifest["files"], found)
    if "content_hash" in manifest and not problems and manifest["content_hash"] != content_hash(manifest):
        problems.append(f"{MANIFEST}: content_hash is not the hash of the files, config hash and undated inputs")
    record_tables = manifest.get("tables", [])
    if "tables" in manifest and (not isinstance(record_tables, list) or not record_tables
                                 or record_tables != sorted(set(record_tables))
                                 or not all(t in schemas.TABLES and t != "questions" for t in record_tables)):
        return problems + [f"{MANIFEST}: tables is not a sorted list of record tables of the schema"]
    problems += _check_splits(manifest["splits"], manifest["counts"], found, record_tables)
    if "annotations" in manifest:
        problems += _check_annotations(manifest["annotations"], root)
    if not problems:
        problems += _check_card(manifest, found.card)
    return problems


def _check_annotations(entry: object, root: Path) -> list[str]:
    """The applied annotation decisions: sorted distinct ids, the same as in stats/annotation_decisions.json."""
    ids = entry.get("decisions") if isinstance(entry, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or ids != sorted(set(ids)):
        return [f"{MANIFEST}: annotations.decisions is not a sorted list of distinct decision ids"]
    listed = root / "stats" / "annotation_decisions.json"
    try:
        used = sorted(d["decision_id"] for d in json.loads(listed.read_text(encoding="utf-8"))["used"])
    except (OSError, ValueError, KeyError, TypeError):
        return [f"stats/annotation_decisions.json: missing or unreadable, the manifest lists {len(ids)} decisions"]
    return [] if used == ids else [f"{MANIFEST}: annotations.decisions differ from stats/annotation_decisions.json"]


def _check_card(manifest: dict, card: str | None) -> list[str]:
    """The dataset card's title, split counts and provenance lines must state what the manifest states."""
    if card is None:
        return [f"{CARD}: missing"]
    lines = card.splitlines()
    expected = [f"# {manifest['name']} {manifest['version']}", f"- config hash: `{manifest['config_hash']}` "
                "(the full config is in `manifest.json`)"]
    expected += [f"| {split} | {manifest['counts'][split]} |" for split in [*manifest["splits"], "pool"]]
    problems = [f"{CARD}: does not say {line!r}" for line in expected if line not in lines]
    stated = sorted(line for line in lines if line.startswith("- input `"))
    inputs = sorted(f"- input `{k}`: `{v}`" for k, v in manifest["inputs"].items())
    if stated != inputs:
        problems.append(f"{CARD}: inputs {stated} differ from the manifest's {inputs}")
    return problems


def _check_identity(manifest: dict, root: Path) -> list[str]:
    problems = []
    resolved = root.resolve() if root.exists() else root.absolute()
    if manifest["name"] != resolved.parent.name or manifest["version"] != resolved.name:
        problems.append(f"{MANIFEST}: name/version {manifest['name']!r}/{manifest['version']!r} "
                        f"!= folder {resolved.parent.name!r}/{resolved.name!r}")
    try:
        check_release_name(manifest["name"])
        check_release_version(manifest["version"])
    except ReleasePathError as exc:
        problems.append(f"{MANIFEST}: {exc}")
    if manifest["schema_version"] != schemas.SCHEMA_VERSION:
        problems.append(f"schema version {manifest['schema_version']!r} != supported {schemas.SCHEMA_VERSION!r}")
    return problems


def _check_config(manifest: dict) -> list[str]:
    config = manifest["config"]
    if not isinstance(config, dict):
        return [f"{MANIFEST}: config is not an object"]
    problems = []
    if manifest["config_hash"] != config_digest(config):
        problems.append(f"{MANIFEST}: config_hash is not the sha256 of the config")
    release = config.get("release")
    if isinstance(release, dict):
        for key in ("name", "version"):
            if key in release and release[key] != manifest[key]:
                problems.append(f"{MANIFEST}: config release.{key} {release[key]!r} != {key} {manifest[key]!r}")
    return problems


def _check_files(listed: object, found: ReleaseFiles) -> list[str]:
    if not isinstance(listed, dict):
        return [f"{MANIFEST}: files is not an object"]
    problems = []
    for rel, meta in sorted(listed.items()):
        actual = found.files.get(rel)
        if actual is None:
            problems.append(f"{rel}: listed in manifest but missing")
        elif meta != actual:
            if not isinstance(meta, dict) or meta.get("bytes") != actual["bytes"]:
                problems.append(f"{rel}: size {actual['bytes']} != {meta.get('bytes') if isinstance(meta, dict) else meta}")
            elif meta.get("sha256") != actual["sha256"]:
                problems.append(f"{rel}: sha256 mismatch")
            else:
                problems.append(f"{rel}: manifest entry has keys {sorted(meta)}, expected bytes and sha256")
    for rel in sorted(set(found.files) - set(listed) - {MANIFEST, MANIFEST_DIGEST}):
        problems.append(f"{rel}: file not listed in manifest")
    return problems


def _check_splits(splits: object, counts: object, found: ReleaseFiles, record_tables: Sequence[str] = ()) -> list[str]:
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits) or len(set(splits)) != len(splits):
        return [f"{MANIFEST}: splits is not a list of distinct names"]
    if not isinstance(counts, dict):
        return [f"{MANIFEST}: counts is not an object"]
    problems = []
    if set(splits) & set(record_tables):
        return [f"{MANIFEST}: a split is named like a record table"]
    expected = [*splits, "pool", *record_tables]
    if sorted(found.rows) != sorted(expected) or "pool" in splits:
        tables = f" + tables {list(record_tables)}" if record_tables else ""
        problems.append(f"{MANIFEST}: splits {splits} + pool{tables} do not match the folders holding "
                        f"part-NNNNN.parquet files {sorted(found.rows)}")
    if sorted(counts) != sorted(expected):
        problems.append(f"{MANIFEST}: counts name {sorted(counts)}, the release has {sorted(expected)}")
    for split in expected:
        rows = found.rows.get(split, 0)
        if rows is None:
            problems.append(f"{split}: a Parquet part cannot be read")
        elif split in counts and (type(counts[split]) is not int or counts[split] != rows):
            problems.append(f"{split}: {rows} rows, manifest says {counts[split]!r}")
    return problems


def _read_split(root: Path, split: str, schema: pa.Schema = schemas.QUESTIONS) -> tuple[pa.Table | None, list[str]]:
    """The split's parts as one table of ``schema`` (None when a part is unreadable or of another schema)."""
    tables: list[pa.Table] = []
    problems = _each_part(root, split, schema, tables.append)
    return (None, problems) if problems else (pa.concat_tables(tables), [])


def _each_part(root: Path, split: str, schema: pa.Schema, consume: Callable[[pa.Table], None]) -> list[str]:
    """Read the split's parts one at a time, whole (every column decoded once), check each against ``schema`` and
    hand the good ones to ``consume``; return the problems (no files, unreadable parts, other schemas)."""
    parts = sorted((root / split).glob("*.parquet"))
    if not parts:
        return [f"{split}: no Parquet files"]
    problems = []
    for part in parts:
        try:
            table = pq.read_table(part)
        except (pa.ArrowInvalid, OSError) as exc:
            problems.append(f"{part.relative_to(root)}: unreadable Parquet ({exc})")
            continue
        if not table.schema.equals(schema, check_metadata=False):
            problems.append(f"{part.relative_to(root)}: schema differs from the record model {schemas.SCHEMA_VERSION}")
            continue
        consume(table)
        del table
    return problems


class _QuestionChecks:
    """A split's question invariants, added up part by part: ids present and distinct, answers not empty, choices
    the answer + 3 distinct distractors (free-form kinds may have none); and the split's distinct images."""

    def __init__(self) -> None:
        self.rows = self.without_id = self.empty_answers = self.bad_choices = 0
        self.unbased: dict[str, int] = {}  # hallucination rows without a known absence basis, by the basis they name
        self.ids: list[pa.Array] = []  # the present ids (the duplicate check needs all of them)
        self.image_ids: list[pa.Array] = []

    def add(self, table: pa.Table) -> None:
        has_id = pc.fill_null(pc.greater(pc.utf8_length(table["question_id"]), 0), False)
        ids = table["question_id"].filter(has_id)
        self.rows += table.num_rows
        self.without_id += table.num_rows - len(ids)
        self.ids += ids.chunks
        self.image_ids.append(pc.unique(table["image_id"]))
        answers = pc.utf8_trim_whitespace(table["answer"].fill_null(""))
        self.empty_answers += pc.sum(pc.equal(pc.utf8_length(answers), 0)).as_py() or 0
        choices = cast(pl.DataFrame, pl.from_arrow(table.select(["answer", "choices", "kind"])))
        good = (
            (pl.col("choices").list.len() == 4)
            & (pl.col("choices").list.n_unique() == 4)
            & pl.col("choices").list.contains(pl.col("answer"))
        ).fill_null(False)
        # free-form kinds (verified, grounded) may have no choices (null or [], as the bias report reads them);
        # templated questions always have four
        no_choices = pl.col("choices").list.len().fill_null(0) == 0
        good = good | (no_choices & ~pl.col("kind").fill_null("template").is_in(list(MULTIPLE_CHOICE_KINDS)))
        self.bad_choices += choices.select((~good).sum()).item()
        halluc = pc.fill_null(table["is_hallucination"], False)
        if pc.any(halluc).as_py():
            bases = table["absence_basis"].filter(halluc)
            unknown = pc.invert(pc.fill_null(pc.is_in(bases, pa.array(BASES, pa.string())), False))
            for basis in bases.filter(unknown).to_pylist():
                name = "null" if basis is None else basis
                self.unbased[name] = self.unbased.get(name, 0) + 1

    def problems(self, split: str) -> list[str]:
        problems = []
        if self.without_id:
            problems.append(f"{split}: {self.without_id} questions without a question_id (null or empty)")
        ids = pa.chunked_array(self.ids, pa.string())
        if pc.count_distinct(ids).as_py() != len(ids):
            problems.append(f"{split}: duplicate question_id")
        if self.empty_answers:
            problems.append(f"{split}: {self.empty_answers} questions with an empty answer")
        if self.bad_choices:
            problems.append(f"{split}: {self.bad_choices} questions whose choices are not the answer + 3 distinct distractors")
        if self.unbased:
            problems.append(f"{split}: {sum(self.unbased.values())} hallucination questions without a known absence "
                            f"basis ({', '.join(f'{k}: {v}' for k, v in sorted(self.unbased.items()))})")
        return problems

    def images(self) -> pa.Array:
        """The split's distinct image ids, in the order they first occur."""
        return pc.unique(pa.chunked_array(self.image_ids, pa.string()))


def _check_disjoint(images: dict[str, pa.Array], splits: list[str]) -> list[str]:
    """Images in two splits (``images``: each split's distinct image ids), the first 20."""
    seen: dict[str, str] = {}
    problems = []
    for split in splits:
        if split not in images:
            continue
        for image in images[split].to_pylist():
            if image in seen:
                problems.append(f"image {image} is in both {seen[image]} and {split}")
            seen.setdefault(image, split)
    return problems[:20]


def _check_groups_disjoint(root: Path, images: dict[str, pa.Array], splits: list[str]) -> list[str]:
    """Image groups (a landmark, a scene, an episode: ``image_groups``) with images in two splits, the first 20."""
    from reasonvqa.image_groups import group_names, groups_of_files

    groups = groups_of_files(sorted((root / "images").glob("*.parquet")))
    grouped = {split: pc.unique(group_names(images[split], groups)) for split in splits if split in images}
    return [problem.replace("image ", "image group ", 1) for problem in _check_disjoint(grouped, splits)]
