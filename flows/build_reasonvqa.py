"""The `build-reasonvqa` flow: sources -> linking -> facts -> questions -> balance -> split -> release.

Each step is one Prefect task per shard over the stage functions in tasks/ and knowledge/;
tasks pass file paths and small stats dicts, never data. Shard markers (reasonvqa.stage)
make a rerun skip finished work; Prefect's own cache is not used. What is not a stage lives
beside it in flows/: the inputs and work key (build_inputs.py), the work folder held while the
stages run (work_session.py), the release's assembly (assemble_release.py), the run report
(run_report.py).
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
from prefect import flow, task
from prefect.futures import as_completed
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.callables import get_call_parameters
from prefect.context import FlowRunContext
from prefect.states import State

from reasonvqa import progress, sources, workstore
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.endpoint import facts_content_id, knowledge_endpoint, replay_endpoint, source_cache_key
from reasonvqa.knowledge.rate_limit import query_throttle
from reasonvqa.knowledge.refresh import utc_now
from reasonvqa.knowledge.release_knowledge import (
    SourceKnowledge, open_release_knowledge, release_knowledge_tables, replay_file,
)
from reasonvqa.flows.assemble_release import BuildTables, assemble_release
from reasonvqa.flows.build_inputs import check_build, exhaustive_labels, input_snapshots, work_key
from reasonvqa.flows.outcome import reported
from reasonvqa.flows.runners import runner_for_endpoint
from reasonvqa.flows.work_session import ReleaseTarget, always_held, work_session
from reasonvqa.config import BuildConfig
from reasonvqa.stage import run_shard, summarize
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.sources.ingest import (
    SourceShard, ingest_unit, list_shards, source_stage_dir, source_stats, unit_dir, write_shard_manifest,
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
    recorded = open_release_knowledge(Path(knowledge_from)) if knowledge_from else None
    check_build(config, recorded)
    target = ReleaseTarget.of(out, overwrite, config.release)
    as_of = knowledge_as_of or utc_now()
    inputs = input_snapshots(config, as_of, recorded)
    with work_session(work, target.out_dir, work_key(config, inputs, recorded)) as session:
        release = _build_in(config, target.out_dir, session.work_dir, inputs, target.local_overwrite, as_of,
                            session.still_held, recorded)
    return target.publish(release)


def _build_in(config: BuildConfig, out_dir: Path, work_dir: Path, inputs: dict[str, str], overwrite: bool,
              as_of: datetime, still_held: Callable[[], None] = always_held,
              recorded: SourceKnowledge | None = None) -> Path:
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
    with (knowledge_endpoint(config.knowledge, work_dir) if replay is None else replay_endpoint()) as endpoint, \
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

    # 5-7. one pool of every kind, the tables of its images, balance, split, stats, release
    return assemble_release(question_dir, extra_pools, BuildTables(extra_tables.get("regions"), knowledge, shards),
                            config, out_dir, work_dir, inputs, report, overwrite, still_held, run_partition_steps)
