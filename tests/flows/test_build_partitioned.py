"""finish_release writes the same release bytes with the pool on disk (partitioned) as in memory."""

from pathlib import Path

import pytest
from prefect import flow

from reasonvqa.config import sample_config
from reasonvqa.flows.build_reasonvqa import finish_release, run_partition_steps
from reasonvqa.flows.runners import make_task_runner
from reasonvqa.tasks.balance import partitioned
from reasonvqa.tasks.balance.config import PartitionConfig
from reasonvqa.tasks.balance.partitioned import in_process
from reasonvqa.tasks.release import writer
from reasonvqa.tasks.release.verify import verify_release
from tests.tasks.balance.synthetic import synthetic_pool


def contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def build(mode: str, root: Path) -> Path:
    config = sample_config()
    config.partitioned = PartitionConfig(mode=mode, min_rows=2_000)
    pool = synthetic_pool(3_000, 450, 12, seed=4)
    release = finish_release(pool, config, root / "out", root / "work", {"source:vg": "sha256:x"}, {}, False)
    assert not (root / "work" / "partitioned").exists()  # the spill is removed once the release is written
    return release


@flow
def release_flow(mode: str, root: Path) -> str:
    """finish_release inside a flow: the partitioned steps become tasks on the flow's task runner."""
    return str(build(mode, root))


def recording(plan, calls: list):
    def recorded(paths, *args, **kwargs):
        calls.append((paths, kwargs.get("run")))
        return plan(paths, *args, **kwargs)
    return recorded


@pytest.fixture
def small_parts(monkeypatch) -> list:
    """Part files of 400 rows, pool files of 700 rows, batches of 300; records each plan_partitioned call."""
    monkeypatch.setattr(writer, "ROWS_PER_FILE", 400)
    monkeypatch.setattr(partitioned, "ROWS_PER_FILE", 300)  # spill parts need not match the writer's files
    monkeypatch.setattr(partitioned, "INPUT_ROWS_PER_FILE", 700)
    monkeypatch.setattr(partitioned, "BATCH_ROWS", 300)  # batches cross the input files' boundaries
    calls: list = []
    monkeypatch.setattr(partitioned, "plan_partitioned", recording(partitioned.plan_partitioned, calls))
    return calls


def test_partitioned_build_writes_the_in_memory_release(tmp_path, small_parts):
    in_memory = build("off", tmp_path / "off")
    on_disk = build("on", tmp_path / "on")
    auto = build("auto", tmp_path / "auto")  # 3,000 rows >= min_rows: on disk
    assert [(len(paths), run) for paths, run in small_parts] == [(5, in_process)] * 2  # 3,000 rows in files of 700
    assert verify_release(on_disk) == []
    expected = contents(in_memory)
    assert len([name for name in expected if name.startswith("pool/part-")]) == 8
    assert contents(on_disk) == expected
    assert contents(auto) == expected


@pytest.mark.integration
def test_partitioned_steps_on_two_dask_workers_write_the_in_memory_release(tmp_path, small_parts):
    in_memory = build("off", tmp_path / "off")
    on_dask = release_flow.with_options(task_runner=make_task_runner(dask_workers=2))
    on_disk = Path(on_dask("on", tmp_path / "dask"))
    assert [run for _, run in small_parts] == [run_partition_steps]
    assert contents(on_disk) == contents(in_memory)


@pytest.mark.parametrize("mode, rows, expected", [("auto", 9, False), ("auto", 10, True), ("on", 0, True),
                                                  ("off", 10**9, False)])
def test_partition_mode_decides_by_pool_rows(mode, rows, expected):
    assert PartitionConfig(mode=mode, min_rows=10).on_disk(rows) is expected


def test_the_partition_setting_is_not_hashed():
    config = sample_config()
    before = config.config_hash()
    config.partitioned = PartitionConfig(mode="on", min_rows=5)
    assert config.config_hash() == before and "partitioned" not in config.canonical_json()
