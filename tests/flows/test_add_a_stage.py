"""ARCHITECTURE.md's "Add a model stage" recipe, followed to the letter: a toy model stage defined here is
named in a build config's ``stages`` and a real sample build (the flow) runs it and tears it down."""

from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from pydantic import BaseModel

from reasonvqa import schemas
from reasonvqa.flows.config import sample_config
from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from reasonvqa.stage import Rejects, StageResult, stage_stats
from reasonvqa.stage_contract import ModelStageConfig, Resources, ShardContext, Stage, StageEntry

pytestmark = pytest.mark.integration

OBJECT_COUNTS = pa.schema([("image_id", pa.string()), ("objects", pa.int64())])


class CountConfig(ModelStageConfig):
    events: str  # file the stage appends its lifecycle events to


def record(events: str, event: str) -> None:
    with open(events, "a", encoding="utf-8") as handle:
        handle.write(f"{event}\n")


class CountObjects(Stage):
    """Tags each image with how many objects its source annotates (a stand-in for a tagger model)."""

    name = "count_objects"
    inputs = {"images": schemas.IMAGES, "objects": schemas.OBJECTS}
    outputs = {"object_counts": OBJECT_COUNTS}
    resources = Resources(device="cpu", memory_mb=64)
    config_model = CountConfig
    batch_size = 16

    def setup(self) -> None:
        record(self.config.events, "count_objects setup")
        self.model = Counter  # "the weights"

    def teardown(self) -> None:
        record(self.config.events, "count_objects teardown")
        del self.model

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        record(self.config.events, f"count_objects process {ctx.shard}")
        images = sorted(inputs["images"]["image_id"].to_pylist())
        labelled = inputs["objects"]["image_id"].to_pylist()
        rows = []
        for start in range(0, len(images), self.batch_size):  # one cached call per batch
            batch = images[start:start + self.batch_size]
            counts = ctx.cache.call("count", {"images": batch, "objects": sorted(labelled)},
                                    lambda batch=batch: [self.model(labelled)[i] for i in batch])
            rows += [{"image_id": i, "objects": n} for i, n in zip(batch, counts)]
        table = pa.Table.from_pylist(rows, schema=OBJECT_COUNTS)
        return StageResult({"object_counts": table}, Rejects(self.name, ctx.shard), rows_in=len(images))


class WitnessConfig(BaseModel):
    events: str


class Witness(Stage):
    """A function stage after ``CountObjects``: records when it starts, writes nothing."""

    name = "witness"
    config_model = WitnessConfig

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        record(self.config.events, f"witness process {ctx.shard}")
        return StageResult({}, Rejects(self.name, ctx.shard), rows_in=0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A sample build with ``CountObjects`` then ``Witness`` added by config; (work folder, events)."""
    root = tmp_path_factory.mktemp("add-a-stage")
    events = root / "events"
    config = sample_config()
    config.stages = [StageEntry(stage=f"{__name__}:CountObjects", config={"events": str(events)}),
                     StageEntry(stage=f"{__name__}:Witness", config={"events": str(events)})]
    release = Path(build_reasonvqa(config, str(root / "out"), work=str(root / "work")))
    assert (release / "manifest.json").exists()
    return root / "work", events.read_text().splitlines()


def test_a_toy_model_stage_added_by_config_runs_in_a_sample_build(built):
    work, _ = built
    counts = pl.read_parquet(work / "count_objects" / "object_counts" / "*.parquet")
    images = pl.concat([pl.read_parquet(work / kind / "unit-00000" / "images" / "*.parquet").select("image_id")
                        for kind in ("sources_vg", "sources_gldv2", "sources_sa1b", "sources_nuscenes")])
    objects = pl.concat([pl.read_parquet(work / kind / "unit-00000" / "objects" / "*.parquet").select("image_id")
                         for kind in ("sources_vg", "sources_gldv2", "sources_sa1b", "sources_nuscenes")
                         if list((work / kind / "unit-00000").glob("objects/*.parquet"))])
    assert sorted(counts["image_id"].to_list()) == sorted(images["image_id"].to_list())
    expected = Counter(objects["image_id"].to_list())
    assert {r["image_id"]: r["objects"] for r in counts.to_dicts()} == {i: expected[i] for i in images["image_id"]}
    assert counts["objects"].sum() == objects.height > 0
    stats = stage_stats(work / "count_objects")
    assert sum(s["rows_in"] for s in stats) == images.height == sum(s["rows_out"] for s in stats)
    assert all(s["calls_made"] >= 1 for s in stats)


def test_the_model_stage_is_torn_down_before_the_next_stage_starts(built):
    _, events = built
    assert events.count("count_objects setup") == 1 and events.count("count_objects teardown") == 1
    teardown = events.index("count_objects teardown")
    assert all(e.startswith("count_objects process") for e in events[1:teardown])
    assert events[teardown + 1:] and all(e.startswith("witness process") for e in events[teardown + 1:])
