"""The `build-reasonvqa` flow: sources -> proposals -> grounded -> linking -> facts -> questions -> release.

Only the wiring: which stages run, in what order, with which config. Every stage is a `Stage`
(reasonvqa/stage_contract.py) run by the one runner (flows/stage_runner.py): one Prefect task per
shard, paths and small stats dicts between tasks, shard markers for resume, teardown when a stage
ends. What is not a stage lives beside it in flows/: the inputs and work key (build_inputs.py), the
work folder held while the stages run (work_session.py), the release's assembly (assemble_release.py),
the run report (run_report.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Callable

import pyarrow as pa
from prefect import flow
from prefect.context import FlowRunContext
from prefect.states import State

from reasonvqa import schemas, sources
from reasonvqa.flows.config import BuildConfig
from reasonvqa.flows.assemble_release import BuildTables, assemble_release
from reasonvqa.flows.build_inputs import check_build, exhaustive_labels, input_snapshots, work_key
from reasonvqa.flows.outcome import reported
from reasonvqa.flows.runners import runner_for_endpoint
from reasonvqa.flows.stage_runner import local_slots, run_partition_steps, run_stage, start_stage
from reasonvqa.flows.work_session import ReleaseTarget, always_held, work_session
from reasonvqa.knowledge.endpoint import facts_content_id, knowledge_endpoint, replay_endpoint, source_cache_key
from reasonvqa.knowledge.facts import linked_item_batches, merge_fact_shards
from reasonvqa.knowledge.refresh import utc_now
from reasonvqa.knowledge.release_knowledge import release_knowledge_tables, replay_file
from reasonvqa.knowledge.stages import FactsStage, KnowledgeShardConfig, LinkStage
from reasonvqa.shards import list_shards, write_shard_manifest
from reasonvqa.stage import read_table, summarize
from reasonvqa.tasks.proposals.shards import proposal_regions, proposal_units
from reasonvqa.tasks.proposals.stage import ProposalsStage
from reasonvqa.tasks.questions.bank import load_bank
from reasonvqa.tasks.questions.grounded_stage import GroundedStage, grounded_config, grounded_results, vlm_units
from reasonvqa.tasks.questions.grounded_vlm import GroundedVLMStage
from reasonvqa.tasks.questions.questions_stage import QuestionsStage, QuestionsStageConfig
from reasonvqa.tasks.release.knowledge_source import SourceKnowledge, open_release_knowledge
from reasonvqa.tasks.sources.coco_instances import write_coco_taxonomy
from reasonvqa.tasks.sources.ingest import SourcesStage, SourceStageConfig, source_stage_dir, unit_dir


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
    plans = [(s, sources.get(s.kind).plan(s, config.shard_size)) for s in config.sources]
    reads = [start_stage(SourcesStage, SourceStageConfig(source=s, shard_size=config.shard_size),
                         source_stage_dir(work_dir, s.kind), units, label=f"read-{s.kind}") for s, units in plans]
    for source, read in zip(config.sources, reads):
        report[f"sources_{source.kind}"] = summarize(read.wait())
    still_held()
    shards = list_shards([(s.kind, i, unit_dir(source_stage_dir(work_dir, s.kind), i))
                          for s, units in plans for i in range(len(units))])
    write_shard_manifest(shards, work_dir / "shards.json", work_dir)

    # 1b. region proposals (tasks/proposals): one task per source shard of sources with an image root
    extra_tables: dict[str, pa.Table] = {}
    proposals_dir = None
    if config.proposals is not None and config.proposals.enabled:
        proposals_dir = work_dir / "proposals"
        report["proposals"] = summarize(run_stage(ProposalsStage, config.proposals, proposals_dir,
                                                  proposal_units(config.proposals, shards)))
        extra_tables["regions"] = proposal_regions(proposals_dir)

    # extra stages of the config (stages: import path and config), each over every source shard
    for entry in config.stages:
        extra, extra_config = entry.load()
        report[extra.name] = summarize(run_stage(extra, extra_config, work_dir / extra.name,
                                                 {s.number: s.inputs(extra.inputs) for s in shards}))

    # 1c. grounded questions from regions (tasks/questions/grounded*): one task per source shard, submitted
    # now and collected after the knowledge stages, which do not need them (the shards' own time, and
    # the task runs' bookkeeping, overlap building the mirror, linking and facts)
    extra_pools: list[pa.Table] = []
    grounding = None
    if config.grounded.enabled:
        coco = write_coco_taxonomy([s for s in config.sources if s.kind == "vg"], work_dir / "coco_taxonomy.parquet")
        grounding = start_stage(GroundedStage, grounded_config(config.grounded, shards, work_dir, proposals_dir,
                                                               exhaustive_labels(config), coco), work_dir / "grounded", shards)

    properties = load_bank().property_ids(config.questions.domains)
    replay = replay_file(recorded.answers, work_dir) if recorded is not None else None
    remote = bool(config.knowledge.endpoint) and replay is None
    link_dir, facts_dir = work_dir / "link", work_dir / "facts"
    with (knowledge_endpoint(config.knowledge, work_dir) if replay is None else replay_endpoint()) as endpoint, \
            runner_for_endpoint(getattr(FlowRunContext.get(), "task_runner", None), endpoint) as querying:
        # 2. linking: one task per source shard of objects, written under the shard's number; 3. facts: the
        # distinct linked items, in batches of shard_size. One query at a time to a remote (public) endpoint;
        # on a cluster given by address, a loopback endpoint is queried from the flow's process (querying)
        queries = KnowledgeShardConfig(knowledge=config.knowledge, endpoint=endpoint, replay=replay,
                                       cache_dir=config.knowledge.cache_dir or work_dir / "_sparql_cache",
                                       cache_key=source_cache_key(config.knowledge, as_of) if replay is None else None,
                                       properties=properties)
        slots = 1 if remote else None
        report["link"] = summarize(run_stage(LinkStage, queries, link_dir, {s.number: s for s in shards},
                                             in_flight=slots, runner=querying))
        still_held()
        report["facts"] = summarize(run_stage(FactsStage, queries, facts_dir,
                                              linked_item_batches(link_dir, config.shard_size),
                                              in_flight=slots, runner=querying))
    still_held()
    if grounding is not None:
        report["grounded"] = summarize(grounding.wait())
        grounded, extra_tables["regions"] = grounded_results(work_dir / "grounded")
        extra_pools.append(grounded)
        if config.grounded.vlm is not None:
            vlm_dir = work_dir / "grounded_vlm"
            report["grounded_vlm"] = summarize(run_stage(GroundedVLMStage, config.grounded.vlm, vlm_dir,
                                                         vlm_units(shards, work_dir / "grounded")))
            extra_pools.append(read_table(vlm_dir, "questions", schemas.QUESTIONS))
    facts_path = merge_fact_shards(facts_dir, work_dir / "facts_merged.parquet")
    snapshot = facts_content_id(config.knowledge, facts_path, inputs["knowledge"])
    inputs = {**inputs, "knowledge_content": snapshot}  # undated: the release's content hash keeps it, not the dates
    knowledge = release_knowledge_tables(config.knowledge, inputs, facts_path, link_dir, facts_dir)

    # 4. questions: one task per source shard of images, joined to its links by shard number, at most
    # local_slots() at once (each holds its tables)
    question_dir = work_dir / "questions"
    report["questions"] = summarize(run_stage(
        QuestionsStage, QuestionsStageConfig(questions=config.questions, link_dir=link_dir, facts_path=facts_path,
                                             seed=config.seed, knowledge_snapshot=snapshot),
        question_dir, {s.number: s for s in shards}, in_flight=local_slots()))
    still_held()

    # 5-7. one pool of every kind, the tables of its images, balance, split, stats, release
    return assemble_release(question_dir, extra_pools, BuildTables(extra_tables.get("regions"), knowledge, shards),
                            config, out_dir, work_dir, inputs, report, overwrite, still_held, run_partition_steps)
