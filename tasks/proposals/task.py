"""Prefect wiring of the proposals stage: one task per source shard of images, models loaded
once per worker process (``reasonvqa.model_stage.instance``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE

from reasonvqa import schemas, workstore
from reasonvqa.model_stage import instance, run_model_shard
from reasonvqa.stage import read_table, summarize
from reasonvqa.tasks.proposals.config import ProposalsConfig
from reasonvqa.tasks.proposals.stage import ProposalsStage
from reasonvqa.tasks.sources.ingest import SourceShard


@task(name="proposals-shard", task_run_name="proposals-shard-{shard:05d}", cache_policy=NO_CACHE)
@workstore.portable
def proposals_shard(images_path: Path, objects_path: Path | None, image_root: Path, shard: int,
                    stage_dir: Path, config: ProposalsConfig) -> dict:
    """Regions with masks for one source shard of images."""

    def read_inputs() -> dict[str, pa.Table]:
        objects = pq.read_table(objects_path) if objects_path is not None and objects_path.exists() else None
        return {"images": pq.read_table(images_path), "objects": objects,
                "root": pa.table({"root": [str(image_root)]})}

    return run_model_shard(stage_dir, shard, instance(ProposalsStage, config), read_inputs)


def run_proposals(config: ProposalsConfig, shards: list[SourceShard], stage_dir: Path) -> tuple[dict, pa.Table]:
    """Submit one proposals task per source shard of every source with an image root (written
    under the shard's build-wide number); wait; return the stage totals and every region
    (sorted by region_id)."""
    calls = [(s.file("images"), s.file("objects"), config.image_roots[s.source], s.number)
             for s in shards if s.source in config.image_roots and workstore.exists(s.file("images"))]
    futures = [proposals_shard.submit(p, o, r, n, stage_dir, config) for p, o, r, n in calls]
    report = summarize([f.result() for f in futures])
    regions = read_table(stage_dir, "regions", schemas.REGIONS)
    return report, regions.sort_by([("region_id", "ascending")])
