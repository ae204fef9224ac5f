"""Write a versioned release folder: splits as Parquet, pool, stats, manifest, dataset card.

The release appears only when complete: everything is written into a hidden sibling
folder, checksummed, then renamed into place.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, TypeGuard

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.errors import DataError, ReleaseExistsError
from reasonvqa.gathered import JointSource, plan_groups, write_group, write_joint
from reasonvqa.locks import exclusive_lock
from reasonvqa.row_views import ROWS_PER_FILE, Rows, RowSource, TableRows, one_chunk_per_column
from reasonvqa.schemas import MANIFEST
from reasonvqa.tasks.release.card import render_card
from reasonvqa.tasks.release.croissant import write_croissant
from reasonvqa.tasks.release.embed import ROWS_PER_FILE as IMAGE_ROWS_PER_FILE
from reasonvqa.tasks.release.embed import RELEASE_IMAGES, as_release_images, images_summary, release_schema
from reasonvqa.tasks.release.paths import inside, release_dir

MANIFEST_DIGEST = "manifest.json.sha256"  # sha256sum line of manifest.json, beside it
LOCKS = ".locks"  # <out>/.locks/<name>/<version>.lock: held while a version is written
CARD = "README.md"
SPLIT_ORDER = ("train", "validation", "test")
WRITERS = 2  # output folders written at once (zstd + Parquet encoding of one file runs on one core)


class UnverifiedReleaseError(DataError):
    """A release that ``verify`` refuses was written; it is not published (exit 1)."""


class EmptySplitError(ValueError):
    """A split would hold no questions: `datasets` cannot load such a release, so it is not written."""


def require_nonempty_splits(name: str, version: str, splits: dict[str, pa.Table], pool_rows: int, hint: str = "") -> None:
    """Raise EmptySplitError naming the first split without rows (call before ``write_release``)."""
    empty = [split for split in _ordered(splits) if splits[split].num_rows == 0]
    if empty:
        raise EmptySplitError(f"release {name} {version}: split {empty[0]!r} is empty "
                              f"({pool_rows} questions in the pool){hint}")


def config_digest(config: dict[str, Any]) -> str:
    """sha256 of the config's canonical JSON (sorted keys, no spaces): what a manifest's config_hash must be."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The one byte form a manifest is written in (verify refuses any other)."""
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")


def digest_line(manifest: bytes) -> str:
    """The content of MANIFEST_DIGEST for these manifest bytes (``sha256sum -c`` reads it)."""
    return f"{hashlib.sha256(manifest).hexdigest()}  {MANIFEST}\n"


DATED_INPUTS = ("knowledge", "knowledge_date")  # name the refresh period; rows carry the facts' content id
# tables whose rows say when their knowledge was fetched (fetched_on); what they hold besides is named by the
# undated input ``knowledge_content`` (the facts' content id, build_reasonvqa)
DATED_TABLES = ("knowledge/",)


def content_hash(manifest: dict[str, Any]) -> str:
    """sha256 of what a release holds, not of when its knowledge was fetched: the files but the card
    (which lists the dated inputs) and the dated tables, the config hash and the undated inputs. Two
    builds whose refetched facts are the same have the same content hash (their question rows and the
    ``knowledge_content`` input name the facts' content, not the fetch date)."""
    files = {k: v["sha256"] for k, v in manifest["files"].items()
             if k != CARD and not (k.startswith(DATED_TABLES) and "knowledge_content" in manifest["inputs"])}
    inputs = {k: v for k, v in manifest["inputs"].items() if k not in DATED_INPUTS}
    body = {"schema_version": manifest["schema_version"], "config_hash": manifest["config_hash"],
            "inputs": inputs, "files": files}
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, streamed."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _with_schema_metadata(table: pa.Table, schema: pa.Schema = schemas.QUESTIONS) -> pa.Table:
    table = schemas.conform(table, schema)
    metadata = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}  # e.g. the `datasets` features
    return table.replace_schema_metadata({**metadata, "reasonvqa.schema_version": schemas.SCHEMA_VERSION})


def write_table_files(table: Rows, folder: Path, schema: pa.Schema = schemas.QUESTIONS) -> list[Path]:
    """Write ``table`` (conformed to ``schema``) as ``part-NNNNN.parquet`` files of at most ROWS_PER_FILE rows.

    A ``RowSource`` is written chunk by chunk (``rows_per_file`` rows per file when it sets one; images
    tables, which may hold bytes, ``embed.ROWS_PER_FILE``); the files are the same bytes as for the same
    rows given as one table.
    """
    folder.mkdir(parents=True, exist_ok=True)
    size = getattr(table, "rows_per_file", IMAGE_ROWS_PER_FILE if schema is RELEASE_IMAGES else ROWS_PER_FILE)
    chunks = table.chunks(size) if isinstance(table, RowSource) else _slices(table, size)
    paths = []
    for i, chunk in enumerate(chunks):
        paths.append(write_part([chunk], folder, i, schema))
        del chunk
    return paths


def write_part(held: list[pa.Table], folder: Path, number: int, schema: pa.Schema = schemas.QUESTIONS) -> Path:
    """Write the table in ``held`` (conformed to ``schema``) as ``folder/part-NNNNN.parquet``, one chunk
    per column. The table is taken out of the list: its chunks are freed as each column is combined."""
    path = folder / f"part-{number:05d}.parquet"
    held.append(_with_schema_metadata(held.pop(), schema))
    pq.write_table(one_chunk_per_column(held), path, compression="zstd", write_statistics=True)
    return path


def _slices(table: pa.Table, size: int) -> Iterator[pa.Table]:
    for start in range(0, max(table.num_rows, 1), size):
        yield table.slice(start, size)


def _sort_by_question_id(table: Rows) -> Rows:
    """Rows in question_id order; an already ordered table (the usual case) is not re-sorted.

    A ``RowSource`` is taken as ordered: its producer (``balance.pipeline.plan_release``, the
    partitioned path) orders its rows by question_id.
    """
    if isinstance(table, RowSource):
        return table
    ids = table["question_id"]
    if table.num_rows < 2 or pc.all(pc.greater_equal(ids.slice(1), ids.slice(0, len(ids) - 1))).as_py():
        return table
    return table.sort_by([("question_id", "ascending")])


def write_release(
    out_root: Path,
    name: str,
    version: str,
    splits: dict[str, Rows],
    *,
    pool: Rows,
    stats_dir: Path | None,
    config: dict[str, Any],
    config_hash: str | None = None,
    inputs: dict[str, str],
    card_notes: str = "",
    stats_files: dict[str, str] | None = None,
    overwrite: bool = False,
    tables: dict[str, Rows] | None = None,
    annotations: dict[str, Any] | None = None,
    stats_ready: Callable[[], object] | None = None,
    verify_first: bool = False,
) -> Path:
    """Write ``<out_root>/<name>/<version>/`` and return its path.

    ``splits`` maps split names (train, test, ...) to QUESTIONS tables; ``pool`` is the
    pre-balancing question pool kept for re-splits. Rows are sorted by question_id. Splits and
    pool may be ``RowSource``s (e.g. ``TableRows``) already in question_id order; the folders
    are written ``WRITERS`` at a time.
    ``tables`` are further record tables named as in ``schemas.TABLES`` (e.g. ``regions``), one folder each.
    ``annotations`` (the human decisions applied, see annotation_exports/apply.py) goes into the manifest.
    ``stats_ready`` is called after the Parquet folders are written and before ``stats_dir`` is copied:
    e.g. the ``result`` of figures still rendering beside the writes (``balance.stats.start_stats``).
    ``verify_first``: run ``reasonvqa verify`` on the staged release and publish it only if it passes
    (else UnverifiedReleaseError, the draft kept as ``<name>/.<version>.unverified``); builds and re-splits do.
    If the version exists with identical content it is left as is; with different
    content a ReleaseExistsError is raised unless ``overwrite``. ``name`` and ``version`` are
    checked (ReleasePathError) and every path written resolves inside ``out_root``.
    """
    expected_hash = config_digest(config)
    if config_hash is not None and config_hash != expected_hash:
        raise ValueError(f"config_hash {config_hash} is not the hash of the config ({expected_hash})")
    config_hash = expected_hash
    out_root = Path(out_root)
    final = release_dir(out_root, name, version)
    out_root.mkdir(parents=True, exist_ok=True)
    tmp = inside(out_root, final.with_name(f".{version}.tmp-{os.getpid()}"))
    lock = inside(out_root, out_root / LOCKS / name / f"{version}.lock")  # outside the release's own folder
    with exclusive_lock(lock, "release"):
        return _write_aside_and_publish(tmp, final, splits, pool=pool, stats_dir=stats_dir, config=config,
                                        config_hash=config_hash, inputs=inputs, card_notes=card_notes,
                                        stats_files=stats_files, overwrite=overwrite, tables=tables,
                                        annotations=annotations, stats_ready=stats_ready, verify_first=verify_first)


def _write_aside_and_publish(tmp: Path, final: Path, splits: dict[str, Rows], *, pool: Rows,
                             stats_dir: Path | None, config: dict[str, Any], config_hash: str,
                             inputs: dict[str, str], card_notes: str, stats_files: dict[str, str] | None,
                             overwrite: bool, tables: dict[str, Rows] | None = None,
                             annotations: dict[str, Any] | None = None,
                             stats_ready: Callable[[], object] | None = None, verify_first: bool = False) -> Path:
    name, version = final.parent.name, final.name
    remove_leftover_staging(final)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        jobs = [(split, splits[split], schemas.QUESTIONS) for split in _ordered(splits)] + [("pool", pool, schemas.QUESTIONS)]
        tables = dict(tables or {})
        if isinstance(tables.get("images"), pa.Table):  # plain IMAGES rows (no bytes) or a release's own table
            tables["images"] = as_release_images(tables["images"])
        jobs += [(table_name, table, release_schema(table_name)) for table_name, table in sorted(tables.items())]
        counts = {folder: table.num_rows for folder, table, _ in jobs}
        write_folders(tmp, jobs)
        images = images_summary(tmp / "images") if "images" in (tables or {}) else None  # what is embedded, why not
        if stats_ready is not None:
            stats_ready()
        if stats_dir is not None and stats_dir.exists():
            shutil.copytree(stats_dir, tmp / "stats")
        # a stats file the card links to must be there (e.g. figures still rendering when stats_ready was not given)
        absent = sorted(f for f in (stats_files or {}).values() if not (tmp / f).is_file())
        if absent:
            raise FileNotFoundError(f"release {name} {version}: stats files not written: {', '.join(absent)}")
        bias_file = tmp / "stats" / "bias.json"
        bias = json.loads(bias_file.read_text(encoding="utf-8")) if bias_file.exists() else None
        breakdown_file = tmp / "stats" / "breakdown.json"  # tasks/release/breakdown.py
        breakdown = json.loads(breakdown_file.read_text(encoding="utf-8")) if breakdown_file.exists() else None
        write_croissant(tmp, name, version, [*_ordered(splits), "pool", *sorted(tables or {})])
        (tmp / CARD).write_text(
            render_card(name=name, version=version, splits=list(_ordered(splits)), counts=counts,
                        config_hash=config_hash, inputs=inputs, stats_files=stats_files or {},
                        notes=card_notes, bias=bias, breakdown=breakdown,
                        tables=sorted(tables or {}), images=images),
            encoding="utf-8",
        )
        manifest = {
            "name": name,
            "version": version,
            "schema_version": schemas.SCHEMA_VERSION,
            "splits": list(_ordered(splits)),
            "counts": counts,
            "config": config,
            "config_hash": config_hash,
            "inputs": dict(sorted(inputs.items())),
            "files": _checksums(tmp),
        }
        if tables:  # record tables beside the questions (e.g. regions); absent when there are none
            manifest["tables"] = sorted(tables)
        if images is not None:  # per source: images embedded, and the others by reason
            manifest["images"] = images
        if annotations is not None:  # the annotation decisions this release applied
            manifest["annotations"] = annotations
        manifest["content_hash"] = content_hash(manifest)
        raw = manifest_bytes(manifest)
        (tmp / MANIFEST).write_bytes(raw)
        (tmp / MANIFEST_DIGEST).write_text(digest_line(raw), encoding="utf-8")
        if verify_first:
            _verify_before_publishing(tmp, final)
        return _publish(tmp, final, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_leftover_staging(final: Path) -> list[Path]:
    """Remove the staging folders ``.<version>.tmp-<pid>`` beside ``final`` whose writer process is gone (a build
    killed while writing); called under the version's lock. Returns what was removed."""
    removed = []
    for staged in sorted(final.parent.glob(f".{glob.escape(final.name)}.tmp-*")) if final.parent.is_dir() else []:
        pid = staged.name.rsplit("-", 1)[-1]
        if staged.is_dir() and not staged.is_symlink() and pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(staged)
            removed.append(staged)
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no pid is that large
        return False
    except PermissionError:
        return True
    return True


def write_folders(root: Path, jobs: list[tuple[str, Rows, pa.Schema]]) -> None:
    """Write each (folder, rows, schema) under ``root``, question tables sorted by question_id, on
    ``WRITERS`` threads (Arrow and Parquet release the GIL). Question folders that are row views of
    one table (``plan_release``'s pool, train and test) or sources of one ``joint`` (the partitioned
    path's spill) are written together, each row gathered once (gathered.py); the other folders then
    ``WRITERS`` at a time, largest first."""
    def write(job: tuple[str, Rows, pa.Schema]) -> None:
        folder, table, schema = job
        write_table_files(_sort_by_question_id(table) if schema is schemas.QUESTIONS else table, root / folder, schema)

    questions = [(folder, rows) for folder, rows, schema in jobs if schema is schemas.QUESTIONS]
    groups = plan_groups([(folder, rows) for folder, rows in questions if isinstance(rows, TableRows)])
    joint = [(folder, rows) for folder, rows in questions if _is_joint(rows)]
    grouped = {member.folder for group in groups for member in group.members}
    for folder in grouped | {folder for folder, _ in joint}:
        (root / folder).mkdir(parents=True, exist_ok=True)

    def part(held: list[pa.Table], folder: str, number: int) -> None:
        write_part(held, root / folder, number)

    with ThreadPoolExecutor(max_workers=WRITERS) as threads:
        for group in groups:
            write_group(group, ROWS_PER_FILE, threads, part)
        grouped |= write_joint(joint, ROWS_PER_FILE, threads, part)
        rest = [job for job in jobs if job[0] not in grouped]
        list(threads.map(write, sorted(rest, key=lambda job: -job[1].num_rows)))


def _is_joint(rows: Rows) -> TypeGuard[JointSource]:
    """True for a source written with the others of its ``joint`` (the partitioned path's spill)."""
    return hasattr(rows, "joint")


def _ordered(splits: dict[str, Rows]) -> list[str]:
    known = [s for s in SPLIT_ORDER if s in splits]
    return known + sorted(s for s in splits if s not in SPLIT_ORDER)


def _checksums(root: Path) -> dict[str, dict[str, Any]]:
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel in (MANIFEST, MANIFEST_DIGEST):
            continue
        files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return files


def _same_content(existing: Path, new: Path) -> bool:
    """Whether the existing release holds what the new one would (its facts may have been fetched another day)."""
    if not existing.exists():
        return False
    if existing.read_bytes() == new.read_bytes():
        return True
    try:
        old = json.loads(existing.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return old.get("content_hash") is not None and old["content_hash"] == json.loads(new.read_text())["content_hash"]


def _verify_before_publishing(tmp: Path, final: Path) -> None:
    """``reasonvqa verify`` on the staged release; one that fails is never published: it is kept aside as
    ``<name>/.<version>.unverified`` (replacing an earlier one) and UnverifiedReleaseError is raised."""
    from reasonvqa.tasks.release.verify import verify_release

    problems = verify_release(tmp, published_as=final)
    if not problems:
        return
    aside = final.with_name(f".{final.name}.unverified")
    if aside.exists():
        shutil.rmtree(aside)
    os.replace(tmp, aside)
    raise UnverifiedReleaseError(f"release {final.parent.name} {final.name} fails verify ({len(problems)} problem(s), "
                                 f"first: {problems[0]}); not published, the draft is kept at {aside}")


def _publish(tmp: Path, final: Path, overwrite: bool) -> Path:
    if final.exists():
        if _same_content(final / MANIFEST, tmp / MANIFEST):  # not republished: the existing one stays as is
            shutil.rmtree(tmp)
            return final
        if not overwrite:
            raise ReleaseExistsError(
                f"release {final} exists with different content; choose another version or overwrite"
            )
        aside = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, aside)
        os.replace(tmp, final)
        shutil.rmtree(aside)
        return final
    os.replace(tmp, final)
    return final
