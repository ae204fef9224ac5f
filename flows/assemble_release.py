"""The release of a build from its question shards: one pool of every kind, the tables it keeps for the pool's
images, human decisions applied, balance and split (in memory, or on disk when the pool is large), stats,
breakdown, the release folder and its artifacts.

It composes several stages (tasks/balance, tasks/release, annotation_exports, knowledge), so it lives in
the composition layer. ``assemble_release`` is the build's step; ``merged_pool`` and ``finish_release``
are its two halves, which tests also call on synthetic pools.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
from prefect.context import FlowRunContext

from reasonvqa import schemas
from reasonvqa.annotation_exports.apply import DECISIONS_FILE, apply_store, write_decisions_file
from reasonvqa.flows.config import BuildConfig
from reasonvqa.flows.artifacts import publish_artifacts, publish_run_report
from reasonvqa.flows.run_report import RUN_REPORT, release_stage_counts
from reasonvqa.flows.work_session import always_held
from reasonvqa.shards import SourceShard, prefetch
from reasonvqa.stage import read_table, shard_paths, write_json
from reasonvqa.image_groups import groups_of
from reasonvqa.tasks.balance.kind_filters import select_kinds
from reasonvqa.tasks.balance.partitioned import Mapper, in_process, plan_partitioned, write_pool_files
from reasonvqa.tasks.balance.pipeline import plan_release
from reasonvqa.tasks.balance.pool_files import PoolFiles, merge_pool_files, pool_rows
from reasonvqa.tasks.balance.stats import start_stats
from reasonvqa.tasks.balance.merge import merge_pools
from reasonvqa.tasks.release.breakdown import released_questions, write_breakdown
from reasonvqa.tasks.release.embed import EmbeddedImages, embedded_lookup
from reasonvqa.tasks.release.images import release_images
from reasonvqa.tasks.release.pixels import PixelReader
from reasonvqa.tasks.release.writer import require_nonempty_splits, write_release
from reasonvqa.work_files import is_remote, location

PARTITIONED = "partitioned"  # the work folder's on-disk balance + split: input pool files and the spill


@dataclass(frozen=True)
class BuildTables:
    """The build's record tables, of all its images: ``regions`` (proposals or grounded; None without),
    ``knowledge`` (``release_knowledge_tables``: the knowledge tables given the pool's image ids) and the
    source ``shards`` whose images tables list the images."""

    regions: pa.Table | None
    knowledge: Callable[[Any], dict[str, pa.Table]]
    shards: list[SourceShard]

    def of_pool(self, pool: pa.Table | PoolFiles, config: BuildConfig) -> dict[str, pa.Table]:
        """The tables a release of ``pool`` keeps: regions, knowledge and images of the images that have a
        question; the images' bytes are read when the release is written, where the license allows."""
        used = pool.image_ids() if isinstance(pool, PoolFiles) else pool
        tables = {} if self.regions is None else {"regions": regions_of_pool(self.regions, used)}
        tables |= self.knowledge(used)  # the facts, answers and links the questions came from
        images = release_images([shard.table("images") for shard in prefetch(self.shards, ["images"])], used)
        tables["images"] = EmbeddedImages(images, PixelReader(config.sources), config.release.embed_images)
        return tables


def assemble_release(question_dir: Path, others: list[pa.Table], tables: BuildTables, config: BuildConfig,
                     out_dir: Path, work_dir: Path, inputs: dict[str, str], report: dict[str, dict], overwrite: bool,
                     still_held: Callable[[], None] = always_held, run_steps: Mapper = in_process) -> Path:
    """The release of the template question shards under ``question_dir`` and the ``others`` kinds' pools,
    with ``tables`` for the pool's images: ``finish_release`` of ``merged_pool``."""
    # the pool goes straight into finish_release, which drops it once the release's row views hold it
    return finish_release(merged_pool(question_dir, others, config, work_dir, report), config, out_dir, work_dir,
                          inputs, report, overwrite, tables, still_held, run_steps)


def merged_pool(question_dir: Path, others: list[pa.Table], config: BuildConfig, work_dir: Path,
                report: dict) -> pa.Table | PoolFiles:
    """The pool of every question kind: files (``PoolFiles``) when it will be balanced on disk, so it is
    never one table in memory; else the merged table. A build with annotation decisions merges in
    memory (``apply_store`` edits a table)."""
    templated = shard_paths(question_dir, "questions")
    if config.annotations is None and config.partitioned.on_disk(pool_rows(templated, others, config.verified_questions)):
        files, report["select"] = merge_pool_files(templated, others, config.verified_questions, config.select,
                                                   work_dir / PARTITIONED / "input")
        if config.partitioned.on_disk(files.num_rows):
            return files
        return files.read()  # the kind selection took it under min_rows: the in-memory path, as without files
    return merge_kinds(read_table(question_dir, "questions", schemas.QUESTIONS), others, config, report)


def merge_kinds(templated: pa.Table, others: list[pa.Table], config: BuildConfig, report: dict) -> pa.Table:
    """One pool of every question kind (template, grounded, verified), filtered by ``config.select``."""
    pool = merge_pools(templated, others, config.verified_questions)
    pool, report["select"] = select_kinds(pool, config.select)
    return pool


def regions_of_pool(regions: pa.Table, pool: pa.Table) -> pa.Table:
    """The regions of the images that have a question in ``pool``."""
    return regions.filter(pc.is_in(regions["image_id"], pc.unique(pool["image_id"])))


def finish_release(pool: pa.Table | PoolFiles, config: BuildConfig, out_dir: Path, work_dir: Path,
                   inputs: dict[str, str], report: dict[str, dict], overwrite: bool,
                   build_tables: BuildTables | None = None, still_held: Callable[[], None] = always_held,
                   run_steps: Mapper = in_process) -> Path:
    """Balance the pool, split it, write stats and the release folder (with ``build_tables`` of the pool's images).

    A ``PoolFiles`` pool (``merged_pool``) goes to the partitioned path as its files; its steps run with
    ``run_steps`` inside a flow run on a local work folder (on a URL's mirror they share spill files
    through this process's disk: ``in_process``). ``still_held`` is checked before the release is decided."""
    tables = build_tables.of_pool(pool, config) if build_tables is not None else None
    still_held()
    partition_dir = work_dir / PARTITIONED
    groups = groups_of((tables or {}).get("images"))  # landmarks, scenes, episodes: each kept in one split
    if isinstance(pool, PoolFiles):  # never in memory: its files go to the partitioned path as they are
        if config.annotations is not None:
            raise ValueError("annotation decisions are applied to a pool in memory, not to PoolFiles")
        paths, tables, applied = pool.paths, dict(tables or {}), None
    else:
        pool, tables, applied = apply_store(config.annotations, pool, tables)  # human decisions, when configured
        on_disk = config.partitioned.on_disk(pool.num_rows)  # the pool leaves memory; a few of its columns come back
        paths = write_pool_files(pool, partition_dir / "input") if on_disk else None
    if paths is not None:
        del pool
        on_runner = FlowRunContext.get() is not None and not is_remote(work_dir)
        done = plan_partitioned(paths, config.balance, config.split, config.seed, partition_dir / "work",
                                run=run_steps if on_runner else in_process, groups=groups)
    else:
        done = plan_release(pool, config.balance, config.split, config.seed, groups)  # views of pool: no copy until written
        del pool
    stats_dir = release_stats_dir(work_dir)
    try:
        if stats_dir.exists():
            shutil.rmtree(stats_dir)
        with ThreadPoolExecutor(max_workers=1) as figures:  # the PNGs render beside the release's Parquet writes
            stats_files, rendered = start_stats(done.pool, done.balance, done.split, stats_dir, figures)
            stats_files.update(write_breakdown(released_questions(done.split.train, done.split.test),
                                               (tables or {}).get("regions"), stats_dir, embedded_lookup((tables or {}).get("images"))))
            write_json(release_stage_counts(report), stats_dir / "stages.json")
            stats_files["stages.json"] = stats_dir / "stages.json"
            if applied is not None:
                stats_files[DECISIONS_FILE] = write_decisions_file(applied, stats_dir)
            write_json(report, work_dir / RUN_REPORT)  # with the run-dependent figures, outside the release
            publish_run_report(report)
            # an empty split cannot be loaded by `datasets`: fail, pointing at the stage counts and rejects
            require_nonempty_splits(config.release.name, config.release.version,
                                    {"train": done.split.train, "test": done.split.test}, done.pool.num_rows,
                                    f"; stage counts in {location(work_dir / RUN_REPORT)}, dropped records in "
                                    f"{location(work_dir)}/*/_rejects/")
            release = write_release(
                out_dir, config.release.name, config.release.version,
                {"train": done.split.train, "test": done.split.test},
                pool=done.pool, stats_dir=stats_dir, config=json.loads(config.canonical_json()),
                config_hash=config.config_hash(), inputs=inputs,
                stats_files={k: f"stats/{Path(v).relative_to(stats_dir).as_posix()}" for k, v in stats_files.items()},
                overwrite=overwrite, tables=tables,
                annotations=applied.manifest_entry() if applied is not None else None,
                stats_ready=rendered.result,
                verify_first=applied is not None,  # human decisions applied: publish only what verify accepts
            )
    finally:  # a work folder URL: the local temporary stats folder, also when the release is refused
        if is_remote(work_dir):
            shutil.rmtree(stats_dir.parent, ignore_errors=True)
    shutil.rmtree(partition_dir, ignore_errors=True)
    publish_artifacts(release, "build")
    return release


def release_stats_dir(work_dir: Path) -> Path:
    """Where the release's stats files are written first: ``<work>/stats``, or for a work folder URL a
    local temporary folder outside the mirror (nothing reads them back from the URL: no upload)."""
    if not is_remote(work_dir):
        return work_dir / "stats"
    return Path(tempfile.mkdtemp(prefix="rvqa-stats.")) / "stats"
