"""The `build-reasonvqa` flow: sources -> linking -> facts -> questions -> balance -> split -> release.

Each step is one Prefect task per shard over the stage functions in tasks/ and knowledge/;
tasks pass file paths and small stats dicts, never data. Shard markers (reasonvqa.stage)
make a rerun skip finished work; Prefect's own cache is not used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
from prefect import flow, get_run_logger, task
from prefect.futures import as_completed
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.callables import get_call_parameters
from prefect.context import FlowRunContext
from prefect.states import State

from reasonvqa import progress, sources, storage, workstore
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.endpoint import (
    facts_content_id, knowledge_date, knowledge_endpoint, knowledge_snapshot, source_cache_key,
)
from reasonvqa.knowledge.rate_limit import query_throttle, require_rate_limit
from reasonvqa.knowledge.refresh import utc_now
from reasonvqa.tasks.release.knowledge_source import SourceKnowledge
from reasonvqa.flows.artifacts import publish_artifacts, publish_run_report
from reasonvqa.flows.outcome import reported
from reasonvqa.flows.runners import runner_for_endpoint
from reasonvqa.lease import Lease, lease_lock
from reasonvqa.locks import exclusive_lock
from reasonvqa.tasks.release.embed import EmbeddedImages, embedded_lookup
from reasonvqa.tasks.release.images import release_images
from reasonvqa.tasks.release.pixels import PixelReader
from reasonvqa.tasks.release.paths import default_work_folder, release_dir
from reasonvqa import schemas
from reasonvqa.flows.config import BuildConfig
from reasonvqa.snapshot import code_fingerprint
from reasonvqa.stage import fetched, read_table, run_shard, shard_paths, stage_stats, summarize, write_json
from reasonvqa.tasks.balance.pool_files import PoolFiles
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.sources.ingest import (
    SourceShard, ingest_unit, list_shards, prefetch, source_stage_dir, source_stats, unit_dir, unit_dirs,
    write_shard_manifest,
)


@task(name="read-source-unit", task_run_name="read-{config.kind}-{stage_dir.name}", cache_policy=NO_CACHE)
@workstore.portable
def read_source_unit(config: sources.SourceConfig, unit: Any, stage_dir: Path, shard_size: int) -> list[dict]:
    """Read one work unit of a source into its stage folder, one shard per ``shard_size`` images."""
    source = sources.get(config.kind, scratch_dir=stage_dir.parent)
    return ingest_unit(source, config, unit, stage_dir, shard_size)


@task(name="link-shard", task_run_name="link-shard-{shard.number:05d}", cache_policy=NO_CACHE)
@workstore.portable
def link_shard(shard: SourceShard, stage_dir: Path, endpoint: str, config: KnowledgeConfig,
               cache_dir: Path, cache_key: str | None, replay: Path | None = None) -> dict:
    """Link one source shard's objects to Wikidata items (written as link shard ``shard.number``), its
    SPARQL answers recorded; ``replay``: answer from a release's recorded answers instead (offline)."""
    from reasonvqa.knowledge.linking import link_objects
    from reasonvqa.knowledge.recorded import RecordingClient, with_answers

    def compute():
        with knowledge_client(endpoint, config, cache_dir, cache_key, replay, f"link-{shard.number:05d}") as queried:
            client = RecordingClient(queried)
            source_file = shard.file("objects").relative_to(stage_dir.parent).as_posix()
            return with_answers(link_objects(shard.table("objects"), client, config, shard.number,
                                             source_file=source_file), client)

    return run_shard(stage_dir, shard.number, compute)


@task(name="facts-shard", task_run_name="facts-shard-{shard:05d}", cache_policy=NO_CACHE)
@workstore.portable
def facts_shard(qids: list[str], shard: int, stage_dir: Path, endpoint: str, config: KnowledgeConfig,
                cache_dir: Path, cache_key: str | None, properties: list[str], replay: Path | None = None) -> dict:
    """Fetch up to 3 hops of facts for one batch of linked items, its SPARQL answers recorded (``replay``:
    answered from a release's recorded answers, offline)."""
    from reasonvqa.knowledge.facts import fetch_facts
    from reasonvqa.knowledge.recorded import RecordingClient, with_answers

    def compute():
        with knowledge_client(endpoint, config, cache_dir, cache_key, replay, f"facts-{shard:05d}") as queried:
            client = RecordingClient(queried)
            return with_answers(fetch_facts(qids, client, config, properties, shard), client)

    return run_shard(stage_dir, shard, compute)


@contextlib.contextmanager
def knowledge_client(endpoint: str, config: KnowledgeConfig, cache_dir: Path, cache_key: str | None,
                     replay: Path | None, cache_name: str):
    """The SPARQL client of a linking or facts shard: the endpoint's, its answers cached in
    ``<cache_dir>/<cache_name>.jsonl``, or a replay of recorded answers (no cache)."""
    if replay is not None:
        from reasonvqa.knowledge.recorded import replay_client

        yield replay_client(replay)
        return
    from reasonvqa.knowledge.wikidata import WikidataClient, query_cache

    with query_cache(cache_dir, cache_name) as cache:
        yield WikidataClient(endpoint, config, cache, cache_key=cache_key, throttle=query_throttle(config))


@task(name="questions-shard", task_run_name="questions-shard-{shard.number:05d}", cache_policy=NO_CACHE)
@workstore.portable
def questions_shard(shard: SourceShard, link_dir: Path, stage_dir: Path, facts_path: Path,
                    config: QuestionConfig, seed: int, knowledge_snapshot: str) -> dict:
    """Generate templated questions for one source shard of images (questions shard ``shard.number``)."""
    from reasonvqa.tasks.questions.shard import questions_for_shard

    return run_shard(stage_dir, shard.number, lambda: questions_for_shard(
        shard, link_dir, facts_path, config, seed, knowledge_snapshot))


def _partition_step_name(parameters: dict[str, Any]) -> str:
    """``partition-<step function>``, e.g. ``partition-spill_file`` (a task run named by what it does)."""
    return f"partition-{getattr(parameters['fn'], '__name__', 'step')}"


@task(name="partition-step", task_run_name=_partition_step_name, cache_policy=NO_CACHE)
def partition_step(fn: Callable, args: tuple) -> Any:
    """One per-file or per-partition step of the on-disk release path (tasks/balance/partitioned.py)."""
    return fn(*args)


def run_partition_steps(fn: Callable, calls: list[tuple]) -> list:
    """``partitioned.Mapper`` of the flow: one ``partition-step`` task per call on the flow's task runner."""
    return run_tasks(partition_step, [(fn, args) for args in calls], False)


def run_tasks(task_fn, calls: list[tuple], one_at_a_time: bool, in_flight: int | None = None,
              runner: TaskRunner | None = None) -> list[dict]:
    """Submit one task per argument tuple; with ``one_at_a_time`` wait for each before the next.

    A public SPARQL endpoint allows one query in flight per client (Wikimedia policy),
    so shards that query it run one after another; the local mirror takes them in parallel.
    ``in_flight`` caps the tasks submitted and not yet finished (None: all at once).
    ``runner``: a started task runner to submit on instead of the flow's (``runner_for_endpoint``).
    """
    if runner is None:
        submit = task_fn.submit
    else:
        def submit(*args):
            return runner.submit(task_fn, get_call_parameters(task_fn.fn, args, {}))
    with progress.stage(task_fn.name.removesuffix("-shard"), len(calls)) as advance:
        if one_at_a_time:
            in_flight = 1
        futures, pending = [], []
        for args in calls:
            if in_flight is not None and len(pending) >= in_flight:
                done = next(as_completed(pending))
                done.result()
                pending.remove(done)
                advance(1)
            futures.append(submit(*args))
            pending.append(futures[-1])
        for future in as_completed(pending):
            future.result()
            advance(1)
        return [f.result() for f in futures]


def local_slots() -> int | None:
    """The cores of this machine plus one when the flow's tasks run on its thread pool, else None (a
    Dask cluster schedules by its own workers). CPU-bound shards beyond that only add memory: each
    one in flight holds its tables (30 shards of 5,000 images at once held 3.3 GB); the one extra
    keeps a core busy while a shard waits on Parquet or the Prefect API (2 cores: 3 in flight was
    7 % faster than 2 at 4.6 M questions)."""
    context = FlowRunContext.get()
    if context is None or isinstance(context.task_runner, ThreadPoolTaskRunner):
        return (os.cpu_count() or 1) + 1
    return None


def run_questions(shards: list[SourceShard], link_dir: Path, question_dir: Path, facts_path: Path,
                  config: QuestionConfig, seed: int, snapshot: str) -> dict:
    """The templated questions stage: one ``questions-shard`` task per source shard, at most
    ``local_slots()`` at once; totals over shards."""
    calls = [(shard, link_dir, question_dir, facts_path, config, seed, snapshot) for shard in shards]
    return summarize(run_tasks(questions_shard, calls, False, in_flight=local_slots()))


def input_snapshots(config: BuildConfig, as_of: datetime | None = None,
                    knowledge: dict[str, str] | None = None) -> dict[str, str]:
    """Content ids of every input: each source's annotation files and the knowledge base
    (a live endpoint's by its refresh period holding ``as_of``, default now; ``knowledge``: the
    ``knowledge`` and ``knowledge_date`` of a release rebuilt from, as its manifest names them)."""
    inputs = {f"source:{s.kind}": sources.get(s.kind).snapshot(s) for s in config.sources}
    if knowledge is not None:
        inputs |= knowledge
    else:
        inputs["knowledge"] = knowledge_snapshot(config.knowledge, as_of)
        inputs["knowledge_date"] = knowledge_date(config.knowledge, as_of)
    return inputs | question_kind_inputs(config)


def question_kind_inputs(config: BuildConfig) -> dict[str, str]:
    """Versions of what non-template kinds are made from: grounded rules, VLM prompts, a verified-QA file."""
    from reasonvqa.tasks.release.writer import sha256_file

    inputs = {}
    if config.grounded.enabled:
        from reasonvqa.tasks.questions.grounded import rules_version

        inputs["grounded_rules"] = rules_version()
        if config.grounded.vlm is not None:
            from reasonvqa.tasks.questions.grounded_vlm import prompt_versions

            inputs |= {f"prompt:{name}": version for name, version in prompt_versions().items()}
    if config.verified_questions is not None:
        inputs["verified_questions"] = "sha256:" + sha256_file(Path(config.verified_questions))
    return inputs


def work_key(config: BuildConfig, inputs: dict[str, str]) -> str:
    """Work-folder name: changes with the config, the inputs or the pipeline's code (sources' included)."""
    readers = {s.kind: sources.source_class(s.kind).code_id() for s in config.sources}
    key = json.dumps([config.config_hash(), inputs, code_fingerprint(), readers], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def check_build_inputs(config: BuildConfig, needs_mirror: bool = True) -> None:
    """Refuse a build that cannot finish, before any work: each source's own check
    (FileNotFoundError naming a missing folder or file), the mirror's entities (unless the knowledge
    comes from a release: ``needs_mirror`` False), the domains."""
    from reasonvqa.tasks.questions.bank import load_bank

    for source in config.sources:
        sources.get(source.kind).check(source)
    if needs_mirror and not config.knowledge.endpoint and not config.knowledge.mirror_entities.exists():
        raise FileNotFoundError(f"knowledge mirror entities not found: {config.knowledge.mirror_entities}")
    load_bank().property_ids(config.questions.domains)  # raises on an unknown domain


@flow(name="build-reasonvqa", log_prints=True)
def build_reasonvqa(config: BuildConfig, out: str, work: str | None = None, overwrite: bool = False,
                    knowledge_as_of: datetime | None = None, knowledge_from: str | None = None) -> State:
    """Build a release from ``config`` into ``out``; calling the flow returns the release folder.

    ``knowledge_as_of`` (default now) picks a live endpoint's refresh period (``knowledge.refresh``):
    builds of one period reuse its facts, the first build of a new period fetches them again.
    ``knowledge_from``: a release folder whose recorded knowledge answers every SPARQL query instead
    (offline: no endpoint, no mirror); with that release's config the rebuild is byte-identical.
    The run's Completed state names the release folder; a Failed one gives the reason in one line.
    """
    return reported(lambda: build_release(config, out, work, overwrite, knowledge_as_of, knowledge_from),
                    lambda release: f"release written to {release}")


def build_release(config: BuildConfig, out: str, work: str | None = None, overwrite: bool = False,
                  knowledge_as_of: datetime | None = None, knowledge_from: str | None = None) -> str:
    """The body of ``build_reasonvqa`` (in its flow run): the release folder, or its URL for an fsspec ``out``."""
    from reasonvqa.tasks.release.knowledge_source import open_release_knowledge

    logger = get_run_logger()
    build = workstore.new_build()
    work_path = storage.work_folder(work, build) if work else None  # a URL: this build's mirror
    recorded = open_release_knowledge(Path(knowledge_from)) if knowledge_from else None
    check_build_inputs(config, needs_mirror=recorded is None)
    if recorded is None:  # a replay sends no query
        require_rate_limit(config.knowledge)
    if storage.protocol(out):  # an fsspec URL: build into a local folder, then upload the release
        storage.filesystem(out)  # fail now, naming the extra to install, when its backend is missing
        # the local copy is only staging: whether a release may be replaced is decided at the URL
        local = build_release(config, str(local_staging(out)), work, True, knowledge_as_of, knowledge_from)
        return storage.upload_release(Path(local), out, overwrite)
    out_dir = Path(out)
    release_dir(out_dir, config.release.name, config.release.version)  # refuse a release path outside out first
    as_of = knowledge_as_of or utc_now()
    inputs = input_snapshots(config, as_of, recorded.inputs if recorded is not None else None)
    # a rebuild from recorded answers never reuses the work of a build that queried (nor the reverse)
    keyed = inputs | ({"knowledge_replay": recorded.answers_digest} if recorded is not None else {})
    work_dir = work_path or default_work_folder(out_dir, out_dir / ".work" / work_key(config, keyed))
    work_dir.mkdir(parents=True, exist_ok=True)
    on_wait = functools.partial(_tell, logger)
    lock = (lease_lock(work.rstrip("/"), "build work folder", build=build, on_wait=on_wait)
            if workstore.is_mirrored(work_dir)
            else exclusive_lock(work_dir / ".lock", "build work folder", on_wait=on_wait))
    with lock as held:
        try:
            return _build_in(config, out_dir, work_dir, inputs, overwrite, as_of,
                             held.check if isinstance(held, Lease) else _always_held, recorded)
        finally:
            forget_mirrors(work_dir)


def _always_held() -> None:
    """The check between stages of a build under an ``fcntl`` lock, which the kernel holds until it ends."""


def forget_mirrors(work_dir: Path) -> None:
    """Remove the build's mirror of a work folder URL in this process and on the Dask workers, so no
    later build trusts what this one fetched (a no-op for a local work folder)."""
    if not workstore.is_mirrored(work_dir):
        return
    workstore.forget(work_dir)
    context = FlowRunContext.get()
    client = getattr(context.task_runner, "_client", None) if context is not None else None  # prefect-dask's
    if client is not None:
        try:
            client.run(workstore.forget, work_dir)
        except Exception as error:  # the workers' copies then go when they exit; the build itself is done
            get_run_logger().warning("could not remove the build's mirrors on the Dask workers: %s", error)


def local_staging(out_url: str) -> Path:
    """The local folder a release for ``out_url`` is built in (stable, so rebuilds reuse its work folder)."""
    import tempfile

    return Path(tempfile.gettempdir()) / "reasonvqa-out" / hashlib.sha256(out_url.encode()).hexdigest()[:16]


def _tell(logger, message: str) -> None:
    """A warning for the Prefect run's log and the terminal (the CLI hides Prefect's log unless --debug)."""
    logger.warning(message)
    print(f"warning: {message}", file=sys.stderr)


def _build_in(config: BuildConfig, out_dir: Path, work_dir: Path, inputs: dict[str, str], overwrite: bool,
              as_of: datetime, still_held: Callable[[], None] = _always_held,
              recorded: SourceKnowledge | None = None) -> str:
    """The build's stages, run while this process holds the work folder's lock (``still_held`` raises,
    between stages, when a lease was lost); ``recorded``: the knowledge of a release, replayed."""
    report: dict[str, dict] = {}

    # 1. sources: one task per work unit of each source (Source.plan), each streaming into shards
    units = [(s, i, unit, unit_dir(source_stage_dir(work_dir, s.kind), i))
             for s in config.sources for i, unit in enumerate(sources.get(s.kind).plan(s, config.shard_size))]
    run_tasks(read_source_unit, [(s, unit, folder, config.shard_size) for s, _, unit, folder in units], False)
    for source in config.sources:
        report[f"sources_{source.kind}"] = summarize(source_stats(source_stage_dir(work_dir, source.kind)))
    still_held()
    shards = list_shards([(s.kind, i, folder) for s, i, _, folder in units])
    write_shard_manifest(shards, work_dir / "shards.json", work_dir)

    # 1b. region proposals (tasks/proposals): one task per source shard of sources with an image root
    extra_tables: dict[str, pa.Table] = {}
    proposals_dir = None
    if config.proposals is not None and config.proposals.enabled:
        from reasonvqa.tasks.proposals.task import run_proposals

        proposals_dir = work_dir / "proposals"
        report["proposals"], extra_tables["regions"] = run_proposals(config.proposals, shards, proposals_dir)

    # 1c. grounded questions from regions (tasks/questions/grounded*): one task per source shard, submitted
    # now and collected after the knowledge stages, which do not need them (the shards' own time, and
    # the task runs' bookkeeping, overlap building the mirror, linking and facts)
    extra_pools: list[pa.Table] = []
    grounded_results = None
    if config.grounded.enabled:
        from reasonvqa.tasks.questions.grounded_task import submit_grounded

        grounded_results = submit_grounded(config.grounded, shards, work_dir, proposals_dir, exhaustive_labels(config))

    from reasonvqa.knowledge.facts import linked_item_batches, merge_fact_shards
    from reasonvqa.tasks.questions.bank import load_bank

    properties = load_bank().property_ids(config.questions.domains)
    cache_dir = config.knowledge.cache_dir or work_dir / "_sparql_cache"
    replay = replay_file(recorded, work_dir) if recorded is not None else None
    cache_key = source_cache_key(config.knowledge, as_of) if replay is None else None
    remote = bool(config.knowledge.endpoint) and replay is None
    with (knowledge_endpoint(config.knowledge, work_dir) if replay is None else _replayed()) as endpoint, \
            runner_for_endpoint(getattr(FlowRunContext.get(), "task_runner", None), endpoint) as querying:
        # 2. linking: one task per source shard of objects, written under the shard's number
        # (on a cluster given by address, a loopback endpoint is queried from the flow's process: querying)
        link_dir = work_dir / "link"
        link_calls = [(shard, link_dir, endpoint, config.knowledge, cache_dir, cache_key, replay) for shard in shards]
        report["link"] = summarize(run_tasks(link_shard, link_calls, remote, runner=querying))
        still_held()

        # 3. facts: the distinct linked items, in batches of shard_size
        facts_dir = work_dir / "facts"
        fact_calls = [(b, n, facts_dir, endpoint, config.knowledge, cache_dir, cache_key, properties, replay)
                      for n, b in enumerate(linked_item_batches(link_dir, config.shard_size))]
        report["facts"] = summarize(run_tasks(facts_shard, fact_calls, remote, runner=querying))
    still_held()
    if grounded_results is not None:
        from reasonvqa.tasks.questions.grounded_task import run_grounded_vlm

        report["grounded"], grounded, extra_tables["regions"] = grounded_results()
        extra_pools.append(grounded)
        if config.grounded.vlm is not None:
            report["grounded_vlm"], vlm = run_grounded_vlm(config.grounded.vlm, shards, work_dir)
            extra_pools.append(vlm)
    facts_path = merge_fact_shards(facts_dir, work_dir / "facts_merged.parquet")
    snapshot = facts_content_id(config.knowledge, facts_path, inputs["knowledge"])
    inputs = {**inputs, "knowledge_content": snapshot}  # undated: the release's content hash keeps it, not the dates
    knowledge = release_knowledge_tables(config.knowledge, inputs, facts_path, link_dir, facts_dir)

    # 4. questions: one task per source shard of images, joined to its links by shard number
    question_dir = work_dir / "questions"
    report["questions"] = run_questions(shards, link_dir, question_dir, facts_path, config.questions, config.seed, snapshot)
    still_held()
    pool = merged_pool(question_dir, extra_pools, config, work_dir, report)
    used = pool.image_ids() if isinstance(pool, PoolFiles) else pool  # what the images and regions keep
    if "regions" in extra_tables:  # the pixel evidence of the images that have questions
        extra_tables["regions"] = regions_of_pool(extra_tables["regions"], used)
    extra_tables |= knowledge(used)  # the facts, answers and links the questions came from
    images = release_images([shard.table("images") for shard in prefetch(shards, ["images"])], used)
    del used
    # bytes are read when the release is written (a file's rows at a time), where the license allows
    extra_tables["images"] = EmbeddedImages(images, PixelReader(config.sources), config.release.embed_images)

    # 5-7. balance, split, stats, release
    # handed over with no local name left: the release's row views then hold the pool's only reference
    handed = [pool]
    del pool
    still_held()
    release = finish_release(handed.pop(), config, out_dir, work_dir, inputs, report, overwrite, extra_tables)
    return str(release)


@contextlib.contextmanager
def _replayed():
    """The "endpoint" of a build that replays recorded answers: none is started or queried."""
    yield "replay:"


def replay_file(recorded: SourceKnowledge, work_dir: Path) -> Path:
    """The release's recorded answers as one file of the work folder, which every knowledge shard reads."""
    from reasonvqa.knowledge.recorded import write_replay_file

    path = write_replay_file(recorded.answers, work_dir / "knowledge_replay.parquet")
    workstore.push(path)
    return path


def release_knowledge_tables(config: KnowledgeConfig, inputs: dict[str, str], facts_path: Path, link_dir: Path,
                             facts_dir: Path) -> Callable[[Any], dict[str, pa.Table]]:
    """The release's knowledge tables, given the pool (or its image ids): the merged facts with where and when
    they were fetched, every SPARQL answer the linking and facts shards used, the links of the pool's images."""
    from reasonvqa.knowledge.recorded import TABLE, merge_answers
    from reasonvqa.knowledge.release_knowledge import fetched_from, knowledge_table, links_of_images
    from reasonvqa.schemas import FACTS_TABLE, LINKS_TABLE

    facts = knowledge_table(facts_path, fetched_from(config, inputs["knowledge"]), inputs["knowledge_date"])
    answers = merge_answers([read_table(d, TABLE, schemas.KNOWLEDGE_QUERIES) for d in (link_dir, facts_dir)])
    links = read_table(link_dir, "entity_links", schemas.ENTITY_LINKS)

    def tables(used: Any) -> dict[str, pa.Table]:
        images = used["image_id"] if isinstance(used, pa.Table) else used
        return {FACTS_TABLE: facts, TABLE: answers, LINKS_TABLE: links_of_images(links, images)}

    return tables


def exhaustive_labels(config: BuildConfig) -> dict[str, list[str] | None]:
    """Source kind -> the labels its annotations cover exhaustively: a source config's ``exhaustive_labels``, or
    None where the source declares its own categories exhaustive (nuScenes); kinds with neither are left out."""
    out: dict[str, list[str] | None] = {}
    for source in config.sources:
        declared = source.exhaustive_labels
        if declared is None and not sources.get(source.kind).exhaustive_taxonomy:
            continue
        if source.kind in out and out[source.kind] != declared:
            raise ValueError(f"sources of kind {source.kind!r} declare different exhaustive_labels; give one list")
        out[source.kind] = sorted(declared) if declared is not None else None
    return out


def merged_pool(question_dir: Path, others: list[pa.Table], config: BuildConfig, work_dir: Path,
                report: dict) -> pa.Table | PoolFiles:
    """The pool of every question kind: files (``PoolFiles``) when it will be balanced on disk, so it is
    never one table in memory; else the merged table. A build with annotation decisions merges in
    memory (``apply_store`` edits a table)."""
    from reasonvqa.tasks.balance.pool_files import merge_pool_files, pool_rows

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
    from reasonvqa.tasks.balance.kind_filters import select_kinds
    from reasonvqa.tasks.balance.merge import merge_pools

    pool = merge_pools(templated, others, config.verified_questions)
    pool, report["select"] = select_kinds(pool, config.select)
    return pool


def regions_of_pool(regions: pa.Table, pool: pa.Table) -> pa.Table:
    """The regions of the images that have a question in ``pool``."""
    import pyarrow.compute as pc

    return regions.filter(pc.is_in(regions["image_id"], pc.unique(pool["image_id"])))


def finish_release(pool: pa.Table | PoolFiles, config: BuildConfig, out_dir: Path, work_dir: Path,
                   inputs: dict[str, str], report: dict[str, dict], overwrite: bool,
                   tables: dict[str, pa.Table] | None = None) -> Path:
    """Balance the pool, split it, write stats and the release folder (with ``tables``, e.g. regions).

    A ``PoolFiles`` pool (``merged_pool``) goes to the partitioned path as its files."""
    from reasonvqa.tasks.balance.partitioned import in_process, plan_partitioned, write_pool_files
    from reasonvqa.image_groups import groups_of
    from reasonvqa.tasks.balance.pipeline import plan_release
    from reasonvqa.tasks.balance.stats import start_stats
    from reasonvqa.tasks.release.breakdown import released_questions, write_breakdown
    from reasonvqa.tasks.release.writer import require_nonempty_splits, write_release
    from reasonvqa.annotation_exports.apply import DECISIONS_FILE, apply_store, write_decisions_file

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
        # the steps share spill files through the work folder's disk: on a URL's mirror they run in this process
        on_runner = FlowRunContext.get() is not None and not workstore.is_mirrored(work_dir)
        done = plan_partitioned(paths, config.balance, config.split, config.seed, partition_dir / "work",
                                run=run_partition_steps if on_runner else in_process, groups=groups)
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
                                    f"; stage counts in {workstore.url_of(work_dir / RUN_REPORT)}, dropped records in "
                                    f"{workstore.url_of(work_dir)}/*/_rejects/")
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
        if workstore.is_mirrored(work_dir):
            shutil.rmtree(stats_dir.parent, ignore_errors=True)
    shutil.rmtree(partition_dir, ignore_errors=True)
    publish_artifacts(release, "build")
    return release


def release_stats_dir(work_dir: Path) -> Path:
    """Where the release's stats files are written first: ``<work>/stats``, or for a work folder URL a
    local temporary folder outside the mirror (nothing reads them back from the URL: no upload)."""
    if not workstore.is_mirrored(work_dir):
        return work_dir / "stats"
    import tempfile

    return Path(tempfile.mkdtemp(prefix="rvqa-stats.")) / "stats"


RUN_REPORT = "run_report.json"
PARTITIONED = "partitioned"  # the work folder's on-disk balance + split: input pool files and the spill
RUN_DEPENDENT = ("requests", "cache_hits", "retries", "seconds")  # vary with cache state and machine


def release_stage_counts(report: dict[str, dict]) -> dict[str, dict]:
    """Per-stage totals without the run-dependent figures: what a release may hold (same inputs, same bytes)."""
    return {stage: {k: v for k, v in totals.items() if k not in RUN_DEPENDENT} for stage, totals in report.items()}


def stage_report(work_dir: Path) -> dict[str, dict]:
    """Totals per stage folder of a build's work directory (a source's units summed under its folder);
    a work folder URL's mirror is read at the URL."""
    report = {}
    for folder in workstore.subfolders(work_dir, ""):
        if any(d.name == "_stats" for d in workstore.subfolders(folder, "_stats")):
            report[folder.name] = summarize(stage_stats(folder))
        elif unit_dirs(folder):
            report[folder.name] = summarize(source_stats(folder))
    return report


def latest_run_report(work: Path) -> Path | None:
    """The run report of a build's work folder, else the newest of the builds' under it (``OUT/.work``),
    present locally (fetched from a work folder URL); None when there is none."""
    found = workstore.listing(work, RUN_REPORT) or [
        report for folder in workstore.subfolders(work, "") for report in workstore.listing(folder, RUN_REPORT)]
    return max(fetched(found), key=lambda p: p.stat().st_mtime, default=None)
