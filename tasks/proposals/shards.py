"""The proposals stage's units and result: one unit per source shard of images of a source with an
image root (run under the shard's build-wide number), the regions of every shard."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.shards import SourceShard
from reasonvqa.stage import read_table
from reasonvqa.tasks.proposals.config import ProposalsConfig


def proposal_units(config: ProposalsConfig, shards: list[SourceShard]) -> dict[int, dict[str, Path | pa.Table | None]]:
    """Shard number -> the ``ProposalsStage`` inputs of each source shard whose source has an image root
    and that has images: its images, its objects (None when it has none) and the root."""
    units: dict[int, dict[str, Path | pa.Table | None]] = {}
    for shard in shards:
        if shard.source not in config.image_roots or not shard.has("images"):
            continue
        units[shard.number] = {**shard.inputs(["images", "objects"]),
                               "root": pa.table({"root": [str(config.image_roots[shard.source])]})}
    return units


def proposal_regions(stage_dir: Path) -> pa.Table:
    """Every region the proposals stage wrote, sorted by region_id."""
    return read_table(stage_dir, "regions", schemas.REGIONS).sort_by([("region_id", "ascending")])
