"""Prefect wiring of grounded questions: corpus labels and relation counts once, then one task per source shard;
the VLM stage (optional) as one task per shard of the images that have regions."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from reasonvqa import schemas, workstore
from reasonvqa.model_stage import instance, run_model_shard
from reasonvqa.stage import part_name, read_table, run_shard, summarize, write_parquet
from reasonvqa.tasks.questions.absence import corpus_taxonomies
from reasonvqa.tasks.questions.grounded_config import GroundedConfig, VLMConfig
from reasonvqa.tasks.questions.grounded_shard import grounded_for_shard, proposals_part
from reasonvqa.tasks.questions.hallucination_relation import corpus_relation_counts
from reasonvqa.tasks.questions.regions import image_labels
from reasonvqa.tasks.sources.ingest import SourceShard, prefetch


def write_corpus_labels(shards: list[SourceShard], proposals_dir: Path | None, path: Path) -> Path:
    """(image_id, label) of every object name and region label of the build, one Parquet file."""
    parts = []
    for shard in prefetch(shards, ["objects", "regions"]):
        parts.append(image_labels(shard.table("objects"), shard.table("regions")))
        proposals = proposals_part(proposals_dir, shard.number)
        if proposals is not None and workstore.fetch(proposals):
            parts.append(image_labels(None, pq.read_table(proposals)))
    table = pa.concat_tables(parts) if parts else image_labels(None, None)
    write_parquet(table.sort_by([("image_id", "ascending"), ("label", "ascending")]), path)
    return path


def write_corpus_relations(shards: list[SourceShard], path: Path) -> Path:
    """How many images of the build join two labels by each askable predicate, one Parquet file."""
    write_parquet(corpus_relation_counts([shard.table("relations") for shard in prefetch(shards, ["relations"])]), path)
    return path


@task(name="grounded-shard", task_run_name="grounded-shard-{shard.number:05d}", cache_policy=NO_CACHE)
@workstore.portable
def grounded_shard(shard: SourceShard, proposals_dir: Path | None, stage_dir: Path, corpus_path: Path,
                   corpus_relations_path: Path, config: GroundedConfig,
                   taxonomies: dict[str, list[str]] | None = None) -> dict:
    """Grounded and hallucination questions of one source shard (written as shard ``shard.number``)."""
    source_file = shard.file("regions").relative_to(stage_dir.parent).as_posix()
    return run_shard(stage_dir, shard.number, lambda: grounded_for_shard(
        shard.table("images"), shard.table("objects"), shard.table("attributes"), shard.table("relations"),
        shard.table("regions"), proposals_part(proposals_dir, shard.number), corpus_path, corpus_relations_path,
        config, shard.number, source_file, taxonomies))


def submit_grounded(config: GroundedConfig, shards: list[SourceShard], work_dir: Path,
                    proposals_dir: Path | None, exhaustive: dict[str, list[str] | None] | None = None,
                    ) -> Callable[[], tuple[dict, pa.Table, pa.Table]]:
    """Write the corpus files and submit one grounded task per source shard without waiting for them;
    the returned call waits for them and gives the stage totals, the questions and every region.

    ``exhaustive``: source kind -> the labels it annotates exhaustively (None: its own categories, the labels
    its images carry in the corpus); absence.corpus_taxonomies resolves it once for every shard."""
    stage_dir = work_dir / "grounded"
    corpus = write_corpus_labels(shards, proposals_dir, work_dir / "corpus_labels.parquet")
    corpus_relations = write_corpus_relations(shards, work_dir / "corpus_relations.parquet")
    taxonomies = corpus_taxonomies(pq.read_table(corpus), exhaustive or {}) if exhaustive else {}
    futures = [grounded_shard.submit(s, proposals_dir, stage_dir, corpus, corpus_relations, config, taxonomies)
               for s in shards]

    def collect() -> tuple[dict, pa.Table, pa.Table]:
        report = summarize([f.result() for f in futures])
        questions = read_table(stage_dir, "questions", schemas.QUESTIONS)
        regions = read_table(stage_dir, "regions", schemas.REGIONS).sort_by([("region_id", "ascending")])
        return report, questions, regions

    return collect


@task(name="grounded-vlm-shard", task_run_name="grounded-vlm-shard-{shard:05d}", cache_policy=NO_CACHE)
@workstore.portable
def grounded_vlm_shard(images_path: Path, regions_path: Path, shard: int, stage_dir: Path, config_json: str) -> dict:
    """VLM-written grounded questions of one source shard (its images and the grounded stage's regions)."""
    from reasonvqa.tasks.questions.grounded_vlm import GroundedVLMStage

    config = VLMConfig.model_validate_json(config_json)
    return run_model_shard(stage_dir, shard, instance(GroundedVLMStage, config),
                           lambda: {"images": pq.read_table(images_path), "regions": pq.read_table(regions_path)})


def run_grounded_vlm(config: VLMConfig, shards: list[SourceShard], work_dir: Path) -> tuple[dict, pa.Table]:
    """One VLM task per source shard whose images have regions (after ``submit_grounded``'s results); totals and questions."""
    stage_dir = work_dir / "grounded_vlm"
    regions_dir = work_dir / "grounded" / "regions"
    calls = [(s.file("images"), regions_dir / f"{part_name(s.number)}.parquet", s.number) for s in shards]
    calls = [(i, r, n) for i, r, n in calls if workstore.exists(i) and workstore.fetch(r) and pq.ParquetFile(r).metadata.num_rows]
    config_json = config.model_dump_json()
    report = summarize([f.result() for f in [grounded_vlm_shard.submit(i, r, n, stage_dir, config_json) for i, r, n in calls]])
    return report, read_table(stage_dir, "questions", schemas.QUESTIONS)
