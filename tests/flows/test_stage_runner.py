from collections import Counter
from pathlib import Path

import os
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from reasonvqa.flows.runners import make_task_runner
from reasonvqa.flows.stage_runner import WorkerDied, run_stage
from reasonvqa.stage_contract import read_shard_inputs
from reasonvqa.stage import read_table
from tests.flows.process_fixtures import SquaresConfig, SquaresOnThreads, SquaresStage
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


SHARD_NUMBERS = {0: [3, -1, 4], 2: [0, 5], 4: [-2], 6: [7, 1]}


@pytest.fixture
def spawnable(monkeypatch):
    """The checkout on sys.path, which spawned workers copy: they import the toy stage as ``tests.flows...``
    (pytest's importlib mode finds ``tests`` without it)."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))


def write_numbers(folder: Path) -> dict[int, dict[str, Path]]:
    """One Parquet file of numbers per shard, keyed by shard number."""
    folder.mkdir(parents=True, exist_ok=True)
    for shard, numbers in SHARD_NUMBERS.items():
        pq.write_table(pa.table({"n": pa.array(numbers, pa.int64())}), folder / f"numbers-{shard}.parquet")
    return {shard: {"numbers": folder / f"numbers-{shard}.parquet"} for shard in SHARD_NUMBERS}


@flow(task_runner=ThreadPoolTaskRunner(max_workers=4))
def squares_flow(stage: type, config: SquaresConfig, stage_dir: Path, shard_inputs: dict) -> list[dict]:
    return run_stage(stage, config, stage_dir, shard_inputs)


def shard_files(stage_dir: Path) -> dict[str, bytes]:
    """Every file a stage run wrote but its stats (which hold times and the process id), by relative path."""
    return {p.relative_to(stage_dir).as_posix(): p.read_bytes() for p in sorted(stage_dir.rglob("*"))
            if p.is_file() and p.parent.name != "_stats"}


def computed(events: Path) -> list[tuple[str, int]]:
    """(process-<shard>, pid) per shard the stage computed, in the order written."""
    return [(kind, int(pid)) for kind, pid in (line.split() for line in events.read_text().splitlines())]


def test_a_cpu_bound_stage_computes_its_shards_in_worker_processes_and_writes_what_threads_write(tmp_path, spawnable):
    shard_inputs = write_numbers(tmp_path / "in")
    on_threads = squares_flow(SquaresOnThreads, SquaresConfig(events=str(tmp_path / "threads.events")),
                              tmp_path / "threads" / "squares", shard_inputs)
    config = SquaresConfig(events=str(tmp_path / "processes.events"))
    in_processes = squares_flow(SquaresStage, config, tmp_path / "processes" / "squares", shard_inputs)

    assert {s["pid"] for s in on_threads} == {os.getpid()}
    workers = {s["pid"] for s in in_processes}
    assert os.getpid() not in workers and 1 <= len(workers) <= 2  # a pool of one process per core, 2 here at most
    assert sorted(kind for kind, _ in computed(tmp_path / "processes.events")) == [f"process-{s}" for s in (0, 2, 4, 6)]
    timeless = [{k: v for k, v in s.items() if k not in ("seconds", "cpu_seconds", "pid")} for s in in_processes]
    assert timeless == [{k: v for k, v in s.items() if k not in ("seconds", "cpu_seconds", "pid")} for s in on_threads]
    assert [(s["shard"], s["rows_in"], s["rows_out"], s["rejected"]) for s in in_processes] == [
        (0, 3, 2, {"negative": 1}), (2, 2, 2, {}), (4, 1, 0, {"negative": 1}), (6, 2, 2, {})]
    assert read_table(tmp_path / "processes" / "squares", "squares").to_pylist() == [
        {"n": 3, "square": 9}, {"n": 4, "square": 16}, {"n": 0, "square": 0}, {"n": 5, "square": 25},
        {"n": 7, "square": 49}, {"n": 1, "square": 1}]
    rejects = read_table(tmp_path / "processes" / "squares", "_rejects")
    assert list(zip(rejects["reason"].to_pylist(), rejects["source"].to_pylist())) == [
        ("negative", "numbers-0.parquet#1"), ("negative", "numbers-4.parquet#0")]
    written = shard_files(tmp_path / "processes" / "squares")
    assert sorted(p for p in written if p.startswith("_done/")) == [f"_done/part-0000{s}" for s in (0, 2, 4, 6)]
    assert written == shard_files(tmp_path / "threads" / "squares")  # the same bytes, markers and rejects as on threads

    events = computed(tmp_path / "processes.events")
    assert squares_flow(SquaresStage, config, tmp_path / "processes" / "squares", shard_inputs) == in_processes
    assert computed(tmp_path / "processes.events") == events  # every shard done: nothing computed again


def test_a_shard_failing_in_a_worker_process_raises_its_error_naming_the_shard(tmp_path, spawnable):
    config = SquaresConfig(events=str(tmp_path / "events"), fail_at=5)
    with pytest.raises(ValueError, match=r"^numbers-2\.parquet record 1: 5 is unlucky\n"
                                         r"\(stage 'squares' shard 00002, computed in a worker process\)$") as raised:
        squares_flow(SquaresStage, config, tmp_path / "squares", write_numbers(tmp_path / "in"))
    assert raised.value.__notes__ == ["(stage 'squares' shard 00002, computed in a worker process)"]
    assert not (tmp_path / "squares" / "_done" / "part-00002").exists()


def test_a_killed_worker_fails_its_shard_by_name_and_a_rerun_resumes(tmp_path, spawnable):
    shard_inputs = write_numbers(tmp_path / "in")
    events = tmp_path / "events"
    with pytest.raises(WorkerDied, match=r"^stage 'squares' shard 0000[0246]: not written, a worker process of "
                                         r"the stage died \(killed, or out of memory\)"):
        squares_flow(SquaresStage, SquaresConfig(events=str(events), kill_at=7), tmp_path / "squares", shard_inputs)
    done = {int(p.name[-5:]) for p in (tmp_path / "squares" / "_done").glob("part-*")}
    assert 6 not in done
    first = computed(events)

    stats = squares_flow(SquaresStage, SquaresConfig(events=str(events)), tmp_path / "squares", shard_inputs)
    assert [s["shard"] for s in stats] == [0, 2, 4, 6]
    again = [kind for kind, _ in computed(events)[len(first):]]
    assert sorted(again) == [f"process-{s}" for s in (0, 2, 4, 6) if s not in done]  # only the unwritten shards
    assert read_table(tmp_path / "squares", "squares")["square"].to_pylist() == [9, 16, 0, 25, 49, 1]
