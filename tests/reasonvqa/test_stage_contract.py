import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from reasonvqa import stage_contract
from reasonvqa.stage_contract import (
    DeviceUnavailable, Stage, ModelStageConfig, Resources, instance, resolve_device, run_stage_shard,
    teardown_all, teardown_stage,
)
from reasonvqa.schemas import RLE
from reasonvqa.stage import Rejects, StageResult, read_stats
from reasonvqa.table_check import SchemaMismatch
from tests.reasonvqa.stage_fixtures import EventsConfig, LifecycleStage, read_events, set_up_lifecycle
from tests.reasonvqa.stage_fixtures import main as run_hashing

REPO = Path(__file__).resolve().parents[2]


def run_hashing_shard(stage_dir: Path, calls: Path, n: int, stop_at: int | None = None, ready: Path | None = None):
    env = {**os.environ, "MODEL_STAGE_TEST_N": str(n), "MODEL_STAGE_TEST_CALLS": str(calls)}
    if stop_at is not None:
        env.update(MODEL_STAGE_TEST_STOP_AT=str(stop_at), MODEL_STAGE_TEST_READY=str(ready))
    return subprocess.Popen([sys.executable, "-m", "tests.reasonvqa.stage_fixtures", str(stage_dir)],
                            cwd=REPO, env=env)


def logged_calls(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_killed_shard_reruns_no_finished_call_and_writes_what_an_uninterrupted_run_writes(tmp_path, monkeypatch):
    n, stop_at = 30, 12
    killed_dir, calls, ready = tmp_path / "killed" / "hashing", tmp_path / "calls.log", tmp_path / "ready"
    first = run_hashing_shard(killed_dir, calls, n, stop_at, ready)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert first.poll() is None and time.monotonic() < deadline, "the shard ended before the stop point"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before_kill = logged_calls(calls)
    kept = [i for i in range(n) if i % 14 != 7]  # 7 and 21 are rejected without a call
    assert before_kill == [i for i in kept if i <= stop_at]  # 12 never finished: killed inside its call
    assert (killed_dir / "_calls" / "part-00000.jsonl").exists() and not (killed_dir / "_done").exists()

    calls.unlink()
    assert run_hashing_shard(killed_dir, calls, n).wait() == 0
    rerun = logged_calls(calls)
    assert rerun == [i for i in kept if i >= stop_at]  # no finished call again; the one in flight again
    stats = read_stats(killed_dir, 0)
    assert (stats["calls_cached"], stats["calls_made"]) == (len(before_kill) - 1, len(rerun))
    assert (stats["rows_in"], stats["rows_out"], stats["rejected"]) == (30, 28, {"odd_multiple_of_seven": 2})
    assert not (killed_dir / "_calls" / "part-00000.jsonl").exists()

    whole_dir = tmp_path / "whole" / "hashing"
    monkeypatch.setenv("MODEL_STAGE_TEST_N", str(n))
    monkeypatch.setenv("MODEL_STAGE_TEST_CALLS", str(tmp_path / "whole.log"))
    run_hashing(str(whole_dir))  # uninterrupted, in this process
    teardown_all()
    for part in ("hashed/part-00000.parquet", "_rejects/part-00000.parquet"):
        assert (killed_dir / part).read_bytes() == (whole_dir / part).read_bytes()


def test_instance_sets_up_once_for_concurrent_threads_and_tears_down(tmp_path):
    config = EventsConfig(events=str(tmp_path / "events"))
    with_threads = [threading.Thread(target=instance, args=(LifecycleStage, config)) for _ in range(4)]
    for thread in with_threads:
        thread.start()
    for thread in with_threads:
        thread.join()
    assert instance(LifecycleStage, config) is instance(LifecycleStage, config)
    assert [e[0] for e in read_events(tmp_path / "events")] == ["setup"]
    teardown_stage(LifecycleStage)
    assert [e[0] for e in read_events(tmp_path / "events")] == ["setup", "teardown"]
    instance(LifecycleStage, config)  # torn down: the next call sets up again
    teardown_all()
    assert [e[0] for e in read_events(tmp_path / "events")] == ["setup", "teardown", "setup", "teardown"]


def test_a_process_pool_worker_tears_its_instance_down_when_it_exits(tmp_path):
    # pool workers leave through os._exit (no atexit); multiprocessing's finalizers still run
    events = str(tmp_path / "events")
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        worker = pool.apply(set_up_lifecycle, (events,))
        pool.close()
        pool.join()
    assert [(e[0], e[1]) for e in read_events(tmp_path / "events")] == [("setup", worker), ("teardown", worker)]


def test_a_forked_child_does_not_share_its_parents_instances(tmp_path):
    config = EventsConfig(events=str(tmp_path / "events"))
    instance(LifecycleStage, config)
    pid = os.fork()
    if pid == 0:  # child: a fresh set-up, and no teardown of the parent's instance at exit
        os._exit(0 if stage_contract._INSTANCES == {} else 1)
    assert os.waitpid(pid, 0)[1] == 0
    teardown_all()
    assert [e[0] for e in read_events(tmp_path / "events")] == ["setup", "teardown"]


class CudaStage(Stage):
    name = "needs_gpu"
    resources = Resources(device="cuda", memory_mb=64)
    batch_size = 4
    loaded = False

    def setup(self) -> None:
        type(self).loaded = True

    def process(self, inputs, ctx):  # the device tests below never run a shard
        raise AssertionError("CudaStage only exercises device resolution")


def test_a_cuda_stage_without_cuda_fails_in_one_line_before_loading_unless_it_may_fall_back(monkeypatch):
    monkeypatch.setattr(stage_contract, "cuda_device_count", lambda: 0)
    with pytest.raises(DeviceUnavailable) as error:
        instance(CudaStage)
    assert str(error.value) == ("stage 'needs_gpu' needs cuda but this machine has no CUDA device; "
                                "set device: cpu or allow_cpu_fallback: true in its config")
    assert not CudaStage.loaded
    fallback = instance(CudaStage, ModelStageConfig(allow_cpu_fallback=True, batch_size=16))
    assert (fallback.device, fallback.batch_size, CudaStage.loaded) == ("cpu", 16, True)
    on_cpu = CudaStage(ModelStageConfig(device="cpu"))
    assert (on_cpu.device, on_cpu.batch_size) == ("cpu", 4)
    teardown_all()


def test_a_cuda_index_beyond_the_devices_is_refused(monkeypatch):
    monkeypatch.setattr(stage_contract, "cuda_device_count", lambda: 1)
    with pytest.raises(DeviceUnavailable, match=r"needs cuda:1 but this machine has 1 CUDA device\(s\)"):
        resolve_device("x", "cuda:1", 64)


def test_more_memory_than_the_machine_has_is_refused():
    with pytest.raises(DeviceUnavailable, match=r"^stage 'big' declares 1000000000 MB but cpu has \d+ MB$"):
        resolve_device("big", "cpu", 10**9)


def test_a_config_cannot_name_an_unknown_device():
    with pytest.raises(ValueError):
        ModelStageConfig(device="tpu")


REGION = pa.struct([("label", pa.string()), ("box", pa.list_(pa.float64())), ("mask", RLE), ("score", pa.float32())])
DETECTIONS = pa.schema([("image_id", pa.string()), ("regions", pa.list_(REGION))])


class Detector(Stage):
    name = "detector"
    resources = Resources()  # a model stage: its calls are cached per shard
    outputs = {"detections": DETECTIONS}

    def __init__(self, rows: list[dict], schema: pa.Schema) -> None:
        super().__init__()
        self.rows, self.schema = rows, schema

    def process(self, inputs, ctx):
        table = pa.Table.from_pylist(self.rows, schema=self.schema)
        return StageResult({"detections": table}, Rejects(self.name, ctx.shard), rows_in=len(self.rows))


DETECTION = {"image_id": "vg:1", "regions": [
    {"label": "dog", "box": [1.0, 2.0, 30.0, 40.0], "mask": {"size": [50, 60], "counts": "PQ1"}, "score": 0.5},
    {"label": "cat", "box": [5.0, 5.0, 10.0, 10.0], "mask": None, "score": 0.25},
]}


def test_nested_output_columns_are_validated_and_written(tmp_path):
    run_stage_shard(tmp_path / "detector", 0, Detector([DETECTION], DETECTIONS), {})
    written = pa.parquet.read_table(tmp_path / "detector" / "detections" / "part-00000.parquet")
    assert written.schema.equals(DETECTIONS) and written.to_pylist() == [DETECTION]


def test_a_nested_type_that_differs_from_the_schema_names_stage_shard_table_and_column(tmp_path):
    wrong_score = pa.struct([("label", pa.string()), ("box", pa.list_(pa.float64())), ("mask", RLE), ("score", pa.float64())])
    wrong = pa.schema([("image_id", pa.string()), ("regions", pa.list_(wrong_score))])
    with pytest.raises(SchemaMismatch) as error:
        run_stage_shard(tmp_path / "detector", 3, Detector([DETECTION], wrong), {})
    assert str(error.value) == ("stage 'detector' shard 3 table 'detections': "
                                "column regions[].score: expected float, got double")
    assert not (tmp_path / "detector" / "_done").exists()
    assert (tmp_path / "detector" / "_calls" / "part-00003.jsonl").exists()  # kept for the rerun


def test_an_output_table_with_no_declared_schema_is_refused(tmp_path):
    class Undeclared(Detector):
        outputs = {}

    with pytest.raises(SchemaMismatch, match="output table 'detections' is declared neither"):
        run_stage_shard(tmp_path / "detector", 0, Undeclared([DETECTION], DETECTIONS), {})
