from collections import Counter
from pathlib import Path

import os
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from reasonvqa.flows.runners import make_task_runner
from reasonvqa.flows.stage_runner import run_stage
from reasonvqa.stage_contract import read_shard_inputs
from reasonvqa.stage import read_table
from tests.reasonvqa.stage_fixtures import EventsConfig, LifecycleStage, read_events


def write_shards(folder: Path, count: int) -> dict[int, dict[str, Path | None]]:
    """Input shards keyed by shard id (ids deliberately not 0..count-1 in order)."""
    shard_inputs: dict[int, dict[str, Path | None]] = {}
    for shard in range(count):
        path = folder / f"numbers-{shard}.parquet"
        pq.write_table(pa.table({"n": pa.array([shard * 10, shard * 10 + 1], pa.int64())}), path)
        shard_inputs[shard * 2] = {"numbers": path}
    return shard_inputs


@flow
def lifecycle_flow(config: EventsConfig, stage_dir: Path, shard_inputs: dict) -> list[dict]:
    return run_stage(LifecycleStage, config, stage_dir, shard_inputs)


def test_threads_share_one_setup_and_the_flow_tears_it_down(tmp_path):
    config = EventsConfig(events=str(tmp_path / "events"))
    on_threads = lifecycle_flow.with_options(task_runner=ThreadPoolTaskRunner(max_workers=4))
    stats = on_threads(config, tmp_path / "lifecycle", write_shards(tmp_path, 6))
    assert [s["shard"] for s in stats] == [0, 2, 4, 6, 8, 10]
    events = read_events(tmp_path / "events")
    kinds = Counter(e[0] for e in events)
    assert kinds["setup"] == 1 and kinds["teardown"] == 1 and events[-1][0] == "teardown"
    assert sorted(k for k in kinds if k.startswith("process")) == sorted(f"process-{s}" for s in range(0, 12, 2))
    assert len({thread for kind, _, thread in events if kind.startswith("process")}) > 1  # shards ran on several threads
    assert read_table(tmp_path / "lifecycle", "numbers")["n"].to_pylist() == [0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51]
    assert on_threads(config, tmp_path / "lifecycle", write_shards(tmp_path, 6)) == stats
    assert read_events(tmp_path / "events") == events  # every shard done: nothing set up again


@pytest.mark.integration
def test_each_dask_worker_process_sets_up_once_and_the_runner_tears_each_down(tmp_path):
    config = EventsConfig(events=str(tmp_path / "events"))
    on_dask = lifecycle_flow.with_options(task_runner=make_task_runner(dask_workers=2))
    on_dask(config, tmp_path / "lifecycle", write_shards(tmp_path, 6))
    events = read_events(tmp_path / "events")
    setups = Counter(pid for kind, pid, _ in events if kind == "setup")
    workers = {pid for kind, pid, _ in events if kind.startswith("process")}
    assert os.getpid() not in workers and set(setups) == workers and set(setups.values()) == {1}
    assert Counter(pid for kind, pid, _ in events if kind == "teardown") == setups  # by client.run, at the stage's end
    assert read_table(tmp_path / "lifecycle", "numbers").num_rows == 12


def test_inputs_a_shard_lacks_are_empty_tables_of_their_declared_schema_and_missing_files_are_errors(tmp_path):
    tables = read_shard_inputs({"numbers": None}, LifecycleStage.inputs)
    assert tables["numbers"].schema.equals(LifecycleStage.inputs["numbers"]) and tables["numbers"].num_rows == 0
    with pytest.raises(FileNotFoundError, match=r"input table 'numbers' not found: .*gone.parquet"):
        read_shard_inputs({"numbers": tmp_path / "gone.parquet"}, LifecycleStage.inputs)
    with pytest.raises(ValueError, match="input table 'boxes' has no file and no declared schema"):
        read_shard_inputs({"boxes": None}, LifecycleStage.inputs)
