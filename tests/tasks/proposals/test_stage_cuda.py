"""The proposals stage on a CUDA device (skipped on machines without one): same candidates as on the CPU,
boxes equal to float tolerance, masks of the right size; the models really sit on the GPU."""

import json

import numpy as np
import pytest

from reasonvqa.torchvision_cpu import prepare

prepare()
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")

from reasonvqa.stage import read_table  # noqa: E402
from tests.tasks.proposals.test_stage import _set_up, config, run, shard  # noqa: E402,F401  (fixtures)


def test_the_stage_on_cuda_matches_the_cpu_run(config, shard, tmp_path):  # noqa: F811
    cpu_stats = run(config, shard, tmp_path / "cpu")
    on_gpu = config.model_copy(update={"device": "cuda"})
    stage = _set_up(on_gpu)
    assert next(stage.detector.model.parameters()).device.type == "cuda"
    from reasonvqa.stage_contract import run_stage_shard

    gpu_stats = run_stage_shard(tmp_path / "gpu", 0, stage, shard)
    assert gpu_stats["candidates"] == cpu_stats["candidates"] == 60
    assert gpu_stats["rows_in"] == gpu_stats["rows_out"] + sum(gpu_stats["rejected"].values())
    cpu = read_table(tmp_path / "cpu", "regions").to_pylist()
    gpu = read_table(tmp_path / "gpu", "regions").to_pylist()
    assert gpu, "zero thresholds leave regions on the GPU too"
    for row in gpu:
        assert row["mask"]["size"] == ([120, 160] if row["image_id"] == "vg:1" else [160, 120])
        assert json.loads(row["extra"])["tagger"] == "labels"
    # random weights: the same ranking up to float noise, so compare the regions both runs kept
    by_id = {r["region_id"]: r for r in cpu}
    common = [r for r in gpu if r["region_id"] in by_id]
    assert len(common) >= 0.8 * min(len(cpu), len(gpu))
    boxes = np.array([[r[k] for k in "xywh"] for r in common])
    expected = np.array([[by_id[r["region_id"]][k] for k in "xywh"] for r in common])
    np.testing.assert_allclose(boxes, expected, atol=0.05)
