"""The proposals stage over one shard with random-weight GroundingDINO and SAM models."""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

pytest.importorskip("torch")
pytest.importorskip("groundingdino")
pytest.importorskip("segment_anything")

from reasonvqa import schemas  # noqa: E402
from reasonvqa.stage_contract import run_stage_shard  # noqa: E402
from reasonvqa.stage import read_table  # noqa: E402
from reasonvqa.tasks.proposals.detector import Detections  # noqa: E402
from reasonvqa.tasks.proposals.prompts import build_prompt  # noqa: E402
from reasonvqa.tasks.proposals.stage import NEGATIVES, ProposalsStage, detector_negatives  # noqa: E402
from reasonvqa.tasks.proposals.random_models import SMALL_INPUT_SAM, register_tiny_sam, tiny_proposals_config  # noqa: E402


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return tiny_proposals_config(tmp_path_factory.mktemp("models"), sam=SMALL_INPUT_SAM)


@pytest.fixture
def shard(tmp_path):
    root = tmp_path / "images"
    (root / "VG_100K").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name, size in (("1.jpg", (160, 120)), ("2.jpg", (120, 160))):
        Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(root / "VG_100K" / name)
    (root / "VG_100K" / "3.jpg").write_bytes(b"not a jpeg")
    images = schemas.from_rows([
        {"image_id": "vg:1", "source": "vg", "file_path": "VG_100K/1.jpg"},
        {"image_id": "vg:2", "source": "vg", "file_path": "VG_100K/2.jpg"},
        {"image_id": "vg:3", "source": "vg", "file_path": "VG_100K/3.jpg"},
        {"image_id": "vg:4", "source": "vg", "file_path": "VG_100K/4.jpg"},
    ], schemas.IMAGES)
    objects = schemas.from_rows([
        {"object_id": "vg:1/o1", "image_id": "vg:1", "label": "man"},
        {"object_id": "vg:1/o2", "image_id": "vg:1", "label": "dog"},
        {"object_id": "vg:1/o3", "image_id": "vg:1", "label": "red"},  # stop-listed colour
        {"object_id": "vg:2/o1", "image_id": "vg:2", "label": "Traffic Light"},
    ], schemas.OBJECTS)
    return {"images": images, "objects": objects, "root": pa.table({"root": [str(root)]})}


def _set_up(config):
    register_tiny_sam()
    stage = ProposalsStage(config)
    stage.setup()
    return stage


def run(config, shard, stage_dir):
    return run_stage_shard(stage_dir, 0, _set_up(config), shard)


def test_every_candidate_is_a_region_or_a_reject_with_its_reason(config, shard, tmp_path):
    stats = run(config, shard, tmp_path / "proposals")
    regions = read_table(tmp_path / "proposals", "regions")
    rejects = pq.read_table(tmp_path / "proposals" / "_rejects" / "part-00000.parquet").to_pylist()
    assert stats["images"] == 4 and stats["images_unreadable"] == 2 and stats["images_read"] == 2
    assert stats["candidates"] == 30 * 2  # one pass per image, 30 queries, zero thresholds
    assert stats["rows_in"] == stats["candidates"] + 2 == stats["rows_out"] + len(rejects)
    assert stats["tags_stop_listed"] == 1
    reasons = {r["reason"] for r in rejects}
    assert reasons <= {"nms_suppressed", "box_too_large", "class_too_few_instances", "image_unreadable"}
    unreadable = sorted((r["source"], json.loads(r["record"])["image_id"]) for r in rejects if r["reason"] == "image_unreadable")
    assert unreadable == [("VG_100K/3.jpg", "vg:3"), ("VG_100K/4.jpg", "vg:4")]
    rows = regions.to_pylist()
    assert rows, "random weights with zero thresholds still leave some regions"
    assert regions.schema.equals(schemas.REGIONS)
    for row in rows:
        assert row["label"] in {"man", "dog", "traffic light"}
        assert row["origin"] == f"model:grounding_dino+sam:{SMALL_INPUT_SAM}"
        assert row["prompt"] in {"dog . man .", "traffic light ."}
        assert row["mask"]["size"] == ([120, 160] if row["image_id"] == "vg:1" else [160, 120])
        assert 0 <= row["x"] and row["x"] + row["w"] <= (160 if row["image_id"] == "vg:1" else 120) + 1e-9
        assert row["predicted_iou"] is not None and json.loads(row["extra"])["tagger"] == "labels"
    suppressed = [json.loads(r["record"]) for r in rejects if r["reason"] == "nms_suppressed"]
    assert suppressed and all(s["suppressed_by"].startswith(s["image_id"] + "/p") for s in suppressed)
    assert all(r["region_id"].startswith(r["image_id"] + "/p") for r in rows)
    assert regions["region_id"].to_pylist() == sorted(regions["region_id"].to_pylist())


def test_prompted_classes_no_box_reached_are_the_detectors_negatives():
    # two passes over one image: "dog . man ." found a dog box; "cup ." and "man" never reached 0.35
    first = Detections(np.array([[1.0, 2.0, 30.0, 40.0]]), ["dog"], np.array([0.5]), np.array([0.6]),
                       best={"dog": 0.5, "man": 0.3})
    second = Detections(np.zeros((0, 4)), [], np.zeros(0), np.zeros(0), best={"cup": 0.1234567, "man": 0.34})
    dog_man, cup = build_prompt(["dog", "man"]), build_prompt(["cup"])
    found = [(dog_man, first), (cup, second)]
    assert detector_negatives("vg:1", found, {"dog"}, 0.35, "grounding_dino") == [
        {"image_id": "vg:1", "label": "cup", "best_score": 0.123457, "threshold": 0.35, "model": "grounding_dino"},
        {"image_id": "vg:1", "label": "man", "best_score": 0.34, "threshold": 0.35, "model": "grounding_dino"}]
    # a class whose best probability reaches the threshold is no negative, though its box was filtered out
    assert [r["label"] for r in detector_negatives("vg:1", found, {"dog"}, 0.34, "m")] == ["cup"]


def test_the_stage_writes_its_negatives_table(config, shard, tmp_path):
    run(config, shard, tmp_path / "low")  # zero thresholds: every prompted class has its boxes
    table = read_table(tmp_path / "low", "negatives")
    assert table.num_rows == 0 and table.schema.equals(NEGATIVES)


def test_same_inputs_give_identical_bytes_and_a_finished_shard_is_not_redone(config, shard, tmp_path):
    run(config, shard, tmp_path / "a")
    run(config, shard, tmp_path / "b")
    for name in ("regions/part-00000.parquet", "_rejects/part-00000.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    stats = run(config, shard, tmp_path / "a")  # marker present: nothing recomputed
    assert stats["calls_made"] == 2


def test_a_killed_shard_reuses_its_finished_calls(config, shard, tmp_path):
    first = run(config, shard, tmp_path / "a")
    # simulate a kill after the calls: keep the call cache, drop the outputs and the marker
    stage_dir = tmp_path / "b"
    cache = stage_dir / "_calls" / "part-00000.jsonl"
    cache.parent.mkdir(parents=True)
    stage = _set_up(config)
    from reasonvqa.stage_contract import CallCache, ShardContext

    with CallCache(cache, fingerprint=stage.fingerprint()) as calls:  # as run_stage_shard opens it
        stage.process(shard, ShardContext(0, calls))
    again = run_stage_shard(stage_dir, 0, stage, shard)
    assert again["calls_cached"] == 2 and again["calls_made"] == 0
    assert again["rows_out"] == first["rows_out"]
    shutil.rmtree(stage_dir)


def test_outputs_do_not_depend_on_how_images_are_batched_into_calls(config, shard, tmp_path):
    """The loader thread prefetches one call's images ahead: calls of 3 images (a prefetched batch ends mid-shard)
    write the same bytes as calls of 2, whose one detector batch holds the same two readable images. (The bytes are
    not pinned across machines: the random-weight models' float sums differ between CPUs' kernels and thread
    counts, and a detector batch's padding changes them, so calls of 1 image differ.)"""
    root = shard["root"].column(0)[0].as_py()
    outputs = {}
    for per_call in (2, 3):
        out = tmp_path / f"per-call-{per_call}"
        stats = run(config.model_copy(update={"images_per_call": per_call}), shard, out)
        assert (stats["regions"], stats["nms_suppressed"], stats["images_unreadable"]) == (53, 7, 2)
        assert stats["calls_made"] == 2
        rejects = pq.read_table(out / "_rejects" / "part-00000.parquet").to_pylist()
        outputs[per_call] = ((out / "regions" / "part-00000.parquet").read_bytes(),
                             json.dumps(rejects, sort_keys=True, default=str).replace(root, "<root>"))
    assert outputs[2] == outputs[3]
