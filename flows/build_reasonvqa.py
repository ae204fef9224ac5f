"""The `build-reasonvqa` flow: sources -> linking -> facts -> questions -> balance -> split -> release.

Each step is one Prefect task per shard over the stage functions in tasks/ and knowledge/;
tasks pass file paths and small stats dicts, never data. Shard markers (reasonvqa.stage)
make a rerun skip finished work; Prefect's own cache is not used.
"""

from __future__ import annotations

import contextlib
import hashlib
import functools
import json
import shutil
import threading
from pathlib import Path
from typing import Iterator

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.flows.artifacts import publish_artifacts
from reasonvqa import schemas
from reasonvqa.config import BuildConfig, SourceConfig
from reasonvqa.snapshot import code_fingerprint, folder_snapshot_id
from reasonvqa.stage import read_table, run_shard, shard_paths, stage_stats, summarize, write_json
from reasonvqa.tasks.questions.config import QuestionConfig

INGESTERS = {
    "vg": "reasonvqa.tasks.sources.vg:ingest_vg",
    "gldv2": "reasonvqa.tasks.sources.gldv2:ingest_gldv2",
}


def _load(spec: str):
    module, name = spec.split(":")
    return getattr(__import__(module, fromlist=[name]), name)


@task(name="ingest-source", cache_policy=NO_CACHE)
def ingest_source(source: SourceConfig, stage_dir: Path, shard_size: int) -> dict:
    """Stream one source dataset into image-aligned shards."""
    ingest = _load(INGESTERS[source.kind])
    return summarize(ingest(source.path, stage_dir, shard_size=shard_size, max_images=source.max_images))


@task(name="link-shard", cache_policy=NO_CACHE)
def link_shard(objects_path: Path, shard: int, stage_dir: Path, endpoint: str,
               config: KnowledgeConfig, cache_dir: Path, cache_key: str | None) -> dict:
    """Link one shard of objects to Wikidata items."""
    from reasonvqa.knowledge.linking import link_objects
    from reasonvqa.knowledge.wikidata import WikidataClient

    def compute():
        client = WikidataClient(endpoint, config, cache_dir, cache_key=cache_key)
        return link_objects(pq.read_table(objects_path), client, config, shard)

    return run_shard(stage_dir, shard, compute)


@task(name="facts-shard", cache_policy=NO_CACHE)
def facts_shard(qids: list[str], shard: int, stage_dir: Path, endpoint: str, config: KnowledgeConfig,
                cache_dir: Path, cache_key: str | None, properties: list[str]) -> dict:
    """Fetch up to 3 hops of facts for one batch of linked items."""
    from reasonvqa.knowledge.facts import fetch_facts
    from reasonvqa.knowledge.wikidata import WikidataClient

    def compute():
        client = WikidataClient(endpoint, config, cache_dir, cache_key=cache_key)
        return fetch_facts(qids, client, config, properties, shard)

    return run_shard(stage_dir, shard, compute)


_INDEX_LOCK = threading.Lock()


@functools.lru_cache(maxsize=2)
def _knowledge_index(facts_path: Path, config_json: str):
    from reasonvqa.tasks.questions.bank import load_bank
    from reasonvqa.tasks.questions.index import build_index

    return build_index(pq.read_table(facts_path), load_bank(), QuestionConfig.model_validate_json(config_json))


def knowledge_index(facts_path: Path, config: QuestionConfig):
    """The question index of a build's facts, built once per worker process (not per shard)."""
    with _INDEX_LOCK:
        return _knowledge_index(facts_path, config.model_dump_json())


@task(name="questions-shard", cache_policy=NO_CACHE)
def questions_shard(inputs: dict[str, Path | None], shard: int, stage_dir: Path, facts_path: Path,
                    config: QuestionConfig, seed: int, knowledge_snapshot: str) -> dict:
    """Generate templated questions for one shard of images."""
    from reasonvqa.tasks.questions.bank import load_bank
    from reasonvqa.tasks.questions.templated import generate_questions

    def read(table: str, schema: pa.Schema) -> pa.Table:
        path = inputs.get(table)
        return pq.read_table(path) if path is not None and path.exists() else schema.empty_table()

    def compute():
        return generate_questions(
            read("images", schemas.IMAGES), read("objects", schemas.OBJECTS),
            read("relations", schemas.RELATIONS), read("links", schemas.ENTITY_LINKS),
            pq.read_table(facts_path), load_bank(), config, seed=seed, shard=shard,
            knowledge_snapshot=knowledge_snapshot, index=knowledge_index(facts_path, config),
        )

    return run_shard(stage_dir, shard, compute)


@contextlib.contextmanager
def knowledge_endpoint(config: KnowledgeConfig, work: Path) -> Iterator[str]:
    """The configured SPARQL endpoint, or the embedded Oxigraph mirror served on 127.0.0.1."""
    if config.endpoint:
        yield config.endpoint
        return
    from reasonvqa.knowledge.mirror import serve_mirror

    with serve_mirror(config.mirror_entities, work / "mirror") as endpoint:
        yield endpoint


def mirror_cache_key(config: KnowledgeConfig) -> str | None:
    """Cache key of the embedded mirror (its port changes per build, its content does not)."""
    if config.endpoint:
        return None
    from reasonvqa.knowledge.mirror import mirror_cache_key as key

    return key(config.mirror_entities)


def run_tasks(task_fn, calls: list[tuple], one_at_a_time: bool) -> list[dict]:
    """Submit one task per argument tuple; with ``one_at_a_time`` wait for each before the next.

    A public SPARQL endpoint allows one query in flight per client (Wikimedia policy),
    so shards that query it run one after another; the local mirror takes them in parallel.
    """
    if one_at_a_time:
        return [task_fn.submit(*args).result() for args in calls]
    futures = [task_fn.submit(*args) for args in calls]
    return [f.result() for f in futures]


def knowledge_snapshot(config: KnowledgeConfig) -> str:
    if config.endpoint:
        return f"endpoint:{config.endpoint}"
    from reasonvqa.knowledge.mirror import snapshot_id

    return snapshot_id(config.mirror_entities)


def input_snapshots(config: BuildConfig) -> dict[str, str]:
    """Content ids of every input: each source's annotation files and the knowledge base."""
    inputs = {f"source:{s.kind}": folder_snapshot_id(s.path, recursive=False) for s in config.sources}
    inputs["knowledge"] = knowledge_snapshot(config.knowledge)
    return inputs


def work_key(config: BuildConfig, inputs: dict[str, str]) -> str:
    """Work-folder name: changes with the config, the inputs or the pipeline's code."""
    key = json.dumps([config.config_hash(), inputs, code_fingerprint()], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _merged_facts(stage_dir: Path, out: Path) -> Path:
    """All fact shards as one file, deduplicated, each fact at its smallest hop."""
    facts = pl.from_arrow(read_table(stage_dir, "facts", schemas.FACTS))
    keys = [c for c in schemas.FACTS.names if c != "hop"]
    merged = facts.group_by(keys).agg(pl.col("hop").min()).select(schemas.FACTS.names).sort(
        ["subject_qid", "property_id", "value_qid", "value_label", "amount", "time"], nulls_last=True
    )
    pq.write_table(schemas.conform(merged.to_arrow(), schemas.FACTS), out, compression="zstd")
    return out


def check_build_inputs(config: BuildConfig) -> None:
    """Refuse a build that cannot finish, before any work: FileNotFoundError naming a missing
    source folder or required file (or the mirror's entities), ValueError naming unknown domains."""
    from reasonvqa.tasks.questions.bank import load_bank
    from reasonvqa.tasks.sources.gldv2 import locate_split
    from reasonvqa.tasks.sources.gldv2_side import CATEGORIES, csv_rows
    from reasonvqa.tasks.sources.vg import locate_files

    for source in config.sources:
        if not source.path.is_dir():
            raise FileNotFoundError(f"source folder not found: {source.kind}: {source.path}")
        if source.kind == "vg":
            locate_files(source.path)
            continue
        split = locate_split(source.path)
        with contextlib.closing(csv_rows(split)) as rows:
            header = next(rows)
        if "landmark_id" in header and not (source.path / CATEGORIES).is_file():
            raise FileNotFoundError(f"GLDv2 landmark categories not found: {source.path / CATEGORIES}")
    if not config.knowledge.endpoint and not config.knowledge.mirror_entities.exists():
        raise FileNotFoundError(f"knowledge mirror entities not found: {config.knowledge.mirror_entities}")
    load_bank().property_ids(config.questions.domains)  # raises on an unknown domain


@flow(name="build-reasonvqa", log_prints=True)
def build_reasonvqa(config: BuildConfig, out: str, work: str | None = None, overwrite: bool = False) -> str:
    """Build a release from ``config`` into ``out``; returns the release folder."""
    logger = get_run_logger()
    check_build_inputs(config)
    out_dir = Path(out)
    inputs = input_snapshots(config)
    work_dir = Path(work) if work else out_dir / ".work" / work_key(config, inputs)
    work_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, dict] = {}

    # 1. sources: one task per source, each streaming its files into shards
    source_dirs = {s.kind: work_dir / f"sources_{s.kind}" for s in config.sources}
    futures = [ingest_source.submit(s, source_dirs[s.kind], config.shard_size) for s in config.sources]
    for source, future in zip(config.sources, futures):
        report[f"sources_{source.kind}"] = future.result()
    shards = [(kind, i) for kind, d in source_dirs.items() for i, _ in enumerate(shard_paths(d, "objects"))]

    # 1b. region proposals (tasks/proposals): one task per image shard of sources with an image root
    extra_tables: dict[str, pa.Table] = {}
    if config.proposals is not None and config.proposals.enabled:
        from reasonvqa.tasks.proposals.task import run_proposals

        report["proposals"], extra_tables["regions"] = run_proposals(config.proposals, source_dirs, work_dir / "proposals")

    from reasonvqa.tasks.questions.bank import load_bank

    bank = load_bank()
    properties = bank.property_ids(config.questions.domains)
    cache_dir = config.knowledge.cache_dir or work_dir / "_sparql_cache"
    cache_key = mirror_cache_key(config.knowledge)
    snapshot = inputs["knowledge"]
    remote = bool(config.knowledge.endpoint)
    with knowledge_endpoint(config.knowledge, work_dir) as endpoint:
        # 2. linking: one task per source shard of objects
        link_dir = work_dir / "link"
        objects_paths = [shard_paths(source_dirs[k], "objects")[i] for k, i in shards]
        link_calls = [(p, n, link_dir, endpoint, config.knowledge, cache_dir, cache_key)
                      for n, p in enumerate(objects_paths)]
        report["link"] = summarize(run_tasks(link_shard, link_calls, remote))

        # 3. facts: the distinct linked items, in batches of shard_size
        links = read_table(link_dir, "entity_links", schemas.ENTITY_LINKS)
        qids = sorted(set(links["qid"].to_pylist()))
        facts_dir = work_dir / "facts"
        batches = [qids[i : i + config.shard_size] for i in range(0, len(qids), config.shard_size)]
        fact_calls = [(b, n, facts_dir, endpoint, config.knowledge, cache_dir, cache_key, properties)
                      for n, b in enumerate(batches)]
        report["facts"] = summarize(run_tasks(facts_shard, fact_calls, remote))
    facts_path = _merged_facts(facts_dir, work_dir / "facts_merged.parquet")

    # 4. questions: one task per source shard of images
    question_dir = work_dir / "questions"
    question_futures = []
    for n, (kind, i) in enumerate(shards):
        # a source without relations (GLDv2) has no relations folder: the task reads an empty table
        shard_files = {t: source_dirs[kind] / t / f"part-{i:05d}.parquet" for t in ("images", "objects", "relations")}
        shard_files["links"] = link_dir / "entity_links" / f"part-{n:05d}.parquet"
        question_futures.append(
            questions_shard.submit(shard_files, n, question_dir, facts_path, config.questions, config.seed, snapshot)
        )
    report["questions"] = summarize([f.result() for f in question_futures])
    pool = read_table(question_dir, "questions", schemas.QUESTIONS)

    # 5-7. balance, split, stats, release
    release = finish_release(pool, config, out_dir, work_dir, inputs, report, overwrite, extra_tables)
    logger.info("release written to %s", release)
    return str(release)


def finish_release(pool: pa.Table, config: BuildConfig, out_dir: Path, work_dir: Path, inputs: dict[str, str],
                   report: dict[str, dict], overwrite: bool, tables: dict[str, pa.Table] | None = None) -> Path:
    """Balance the pool, split it, write stats and the release folder (with ``tables``, e.g. regions)."""
    from reasonvqa.tasks.balance.pipeline import balance_and_split
    from reasonvqa.tasks.balance.stats import write_stats
    from reasonvqa.tasks.release.writer import require_nonempty_splits, write_release

    done = balance_and_split(pool, config.balance, config.split, config.seed)
    del pool  # done.pool holds the same rows (reordered); keeping both doubles peak memory
    stats_dir = work_dir / "stats"
    if stats_dir.exists():
        shutil.rmtree(stats_dir)
    stats_files = write_stats(done.pool, done.balance, done.split, stats_dir)
    write_json(report, stats_dir / "stages.json")
    stats_files["stages.json"] = stats_dir / "stages.json"
    # an empty split cannot be loaded by `datasets`: fail, pointing at the stage counts and rejects
    require_nonempty_splits(config.release.name, config.release.version,
                            {"train": done.split.train, "test": done.split.test}, done.pool.num_rows,
                            f"; stage counts in {stats_dir / 'stages.json'}, dropped records in {work_dir}/*/_rejects/")
    release = write_release(
        out_dir, config.release.name, config.release.version,
        {"train": done.split.train, "test": done.split.test},
        pool=done.pool, stats_dir=stats_dir, config=json.loads(config.canonical_json()),
        config_hash=config.config_hash(), inputs=inputs,
        stats_files={k: f"stats/{Path(v).relative_to(stats_dir).as_posix()}" for k, v in stats_files.items()},
        overwrite=overwrite, tables=tables,
    )
    publish_artifacts(release)
    return release


def stage_report(work_dir: Path) -> dict[str, dict]:
    """Totals per stage folder of a build's work directory."""
    return {d.name: summarize(stage_stats(d)) for d in sorted(work_dir.iterdir()) if (d / "_stats").exists()}
