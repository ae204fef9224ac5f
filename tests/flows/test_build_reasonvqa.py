"""End to end: build-reasonvqa on the bundled sample, with the real Oxigraph mirror and Prefect API."""

import json
from pathlib import Path

import polars as pl
import pytest

from flows.build_reasonvqa import build_reasonvqa, stage_report
from flows.runners import make_task_runner
from reasonvqa.config import sample_config
from reasonvqa.stage import stage_stats
from tasks.release.verify import verify_release

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("builds")
    first = Path(build_reasonvqa(sample_config(), str(root / "a")))
    # the second build runs its shards on a local Dask cluster: outputs must not depend on the runner
    on_dask = build_reasonvqa.with_options(task_runner=make_task_runner(dask_workers=2))
    second = Path(on_dask(sample_config(), str(root / "b")))
    return first, second


def test_release_verifies_and_is_byte_identical_across_builds_and_runners(two_builds):
    first, second = two_builds
    assert first.parts[-2:] == ("reasonvqa-sample", "0.1.0")
    assert verify_release(first) == []
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    different = [str(f) for f in files if (first / f).read_bytes() != (second / f).read_bytes()]
    assert different == []


def test_release_holds_every_kind_of_question(two_builds):
    release = two_builds[0]
    questions = pl.concat([pl.read_parquet(release / s / "*.parquet") for s in ("train", "test")])
    assert set(questions["n_hop"].to_list()) == {1, 2, 3}
    assert set(questions["image_source"].to_list()) == {"vg", "gldv2"}
    assert questions["has_scene_graph"].any()
    assert questions.filter(pl.col("answer").str.strip_chars() == "").height == 0
    assert questions.select(
        (pl.col("choices").list.len() == 4) & (pl.col("choices").list.n_unique() == 4)
        & pl.col("choices").list.contains(pl.col("answer"))
    ).to_series().all()
    train_images = set(pl.read_parquet(release / "train" / "*.parquet")["image_id"])
    test_images = set(pl.read_parquet(release / "test" / "*.parquet")["image_id"])
    assert train_images and test_images and not train_images & test_images


def test_every_shard_of_every_stage_adds_up(two_builds):
    release = two_builds[0]
    work = next((release.parents[1] / ".work").iterdir())
    report = stage_report(work)
    assert {"sources_vg", "sources_gldv2", "link", "facts", "questions"} <= set(report)
    for stage in report:
        for shard in stage_stats(work / stage):
            assert shard["rows_in"] == shard["rows_out"] + sum(shard["rejected"].values()), (stage, shard)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["counts"]["train"] + manifest["counts"]["test"] <= manifest["counts"]["pool"]
    assert set(manifest["inputs"]) == {"source:vg", "source:gldv2", "knowledge"}
