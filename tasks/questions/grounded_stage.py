"""The grounded stages: ``GroundedStage`` (rules: grounded and hallucination questions and regions of
one source shard, against the build's corpus labels and relation counts, written once by
``grounded_config``) and the units of ``GroundedVLMStage`` (tasks/questions/grounded_vlm.py: one
per source shard whose images have regions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from reasonvqa import schemas
from reasonvqa.shards import SourceShard, prefetch
from reasonvqa.stage import StageResult, part_name, read_table, write_parquet
from reasonvqa.stage_contract import ShardContext, Stage
from reasonvqa.tasks.questions.absence import corpus_taxonomies
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.grounded_shard import grounded_for_shard, proposals_part
from reasonvqa.tasks.questions.hallucination_relation import corpus_relation_counts
from reasonvqa.tasks.questions.regions import image_labels
from reasonvqa.work_files import present


def write_corpus_labels(shards: list[SourceShard], proposals_dir: Path | None, path: Path) -> Path:
    """(image_id, label) of every object name and region label of the build, one Parquet file."""
    parts = []
    for shard in prefetch(shards, ["objects", "regions"]):
        parts.append(image_labels(shard.table("objects"), shard.table("regions")))
        proposals = proposals_part(proposals_dir, shard.number)
        if proposals is not None and present(proposals):
            parts.append(image_labels(None, pq.read_table(proposals)))
    table = pa.concat_tables(parts) if parts else image_labels(None, None)
    write_parquet(table.sort_by([("image_id", "ascending"), ("label", "ascending")]), path)
    return path


def write_corpus_relations(shards: list[SourceShard], path: Path) -> Path:
    """How many images of the build join two labels by each askable predicate, one Parquet file."""
    write_parquet(corpus_relation_counts([shard.table("relations") for shard in prefetch(shards, ["relations"])]), path)
    return path


class GroundedStageConfig(BaseModel):
    """The grounded rules and what every shard reads besides its own tables: the proposals folder (when
    that stage ran), the corpus files and the exhaustive taxonomies of the sources."""

    model_config = ConfigDict(extra="forbid")

    rules: GroundedConfig
    proposals_dir: Path | None = None
    corpus: Path
    corpus_relations: Path
    taxonomies: dict[str, list[str]] = {}
    coco: Path | None = None  # the COCO categories of VG images that are COCO images (tasks/sources/coco_instances.py)


def grounded_config(config: GroundedConfig, shards: list[SourceShard], work_dir: Path, proposals_dir: Path | None,
                    exhaustive: dict[str, list[str] | None] | None = None, coco: Path | None = None) -> GroundedStageConfig:
    """Write the corpus files once and return the stage's config.

    ``exhaustive``: source kind -> the labels it annotates exhaustively (None: its own categories, the labels
    its images carry in the corpus); absence.corpus_taxonomies resolves it once for every shard. ``coco``: the
    COCO category table of the build's VG images, if a VG config names COCO instances files."""
    corpus = write_corpus_labels(shards, proposals_dir, work_dir / "corpus_labels.parquet")
    corpus_relations = write_corpus_relations(shards, work_dir / "corpus_relations.parquet")
    taxonomies = corpus_taxonomies(pq.read_table(corpus), exhaustive or {}) if exhaustive else {}
    return GroundedStageConfig(rules=config, proposals_dir=proposals_dir, corpus=corpus,
                               corpus_relations=corpus_relations, taxonomies=taxonomies, coco=coco)


class GroundedStage(Stage):
    """Grounded and hallucination questions of one source shard (unit: its ``SourceShard``; written as
    shard ``shard.number``), with the regions they ask about."""

    name = "grounded"
    outputs = {"questions": schemas.QUESTIONS, "regions": schemas.REGIONS}
    # not cpu_bound (flows/stage_runner.py): worker processes cost the sample build ~9 CPU s and 3 s wall (2 runs
    # each: 38-39 vs 28-29 user s) for no gain on its small shards; unmeasured at ReasonVQA scale
    cpu_bound = False

    def read(self, unit: Any) -> dict[str, pa.Table]:
        return {name: unit.table(name) for name in ("images", "objects", "attributes", "relations", "regions")}

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        config: GroundedStageConfig = self.config  # type: ignore[assignment]
        shard: SourceShard = ctx.unit
        source_file = shard.file("regions").relative_to(shard.stage_dir.parent.parent).as_posix()
        return grounded_for_shard(
            inputs["images"], inputs["objects"], inputs["attributes"], inputs["relations"], inputs["regions"],
            proposals_part(config.proposals_dir, shard.number), config.corpus, config.corpus_relations,
            config.rules, shard.number, source_file, config.taxonomies, config.coco)


def grounded_results(stage_dir: Path) -> tuple[pa.Table, pa.Table]:
    """The grounded stage's questions and every region it wrote (sorted by region_id)."""
    questions = read_table(stage_dir, "questions", schemas.QUESTIONS)
    return questions, read_table(stage_dir, "regions", schemas.REGIONS).sort_by([("region_id", "ascending")])


def vlm_units(shards: list[SourceShard], grounded_dir: Path) -> dict[int, dict[str, Path]]:
    """Shard number -> the ``GroundedVLMStage`` inputs of each source shard whose images have regions
    (its images, the grounded stage's regions)."""
    units = {}
    for shard in shards:
        regions = grounded_dir / "regions" / f"{part_name(shard.number)}.parquet"
        if shard.has("images") and present(regions) and pq.ParquetFile(regions).metadata.num_rows:
            units[shard.number] = {"images": shard.file("images"), "regions": regions}
    return units
