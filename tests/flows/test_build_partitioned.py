"""finish_release writes the same release bytes with the pool on disk (partitioned) as in memory."""

import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prefect import flow

from reasonvqa import schemas
from reasonvqa.flows.config import sample_config
from reasonvqa.flows import assemble_release
from reasonvqa.flows.assemble_release import finish_release, merged_pool
from reasonvqa.flows.stage_runner import run_partition_steps
from reasonvqa.flows.runners import make_task_runner
from reasonvqa.tasks.balance import partitioned
from reasonvqa.tasks.balance.config import PartitionConfig
from reasonvqa.tasks.balance.kind_filters import KindSelection
from reasonvqa.tasks.balance.partitioned import in_process
from reasonvqa.tasks.balance.pool_files import PoolFiles
from reasonvqa.tasks.release import writer
from reasonvqa.tasks.release.verify import verify_release
from tests.flows.task_runs import task_run_names
from tests.tasks.balance.synthetic import synthetic_pool


def contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def build(mode: str, root: Path) -> Path:
    config = sample_config()
    config.partitioned = PartitionConfig(mode=mode, min_rows=2_000)
    pool = synthetic_pool(3_000, 450, 12, seed=4)
    release = finish_release(pool, config, root / "out", root / "work", {"source:vg": "sha256:x"}, {}, False,
                             run_steps=run_partition_steps)  # its tasks inside a flow run, else in this process
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
    monkeypatch.setattr(assemble_release, "plan_partitioned", recording(partitioned.plan_partitioned, calls))
    return calls


@pytest.fixture(scope="module")
def made_once(tmp_path_factory) -> Callable[..., Any]:
    """``made_once(make, *args)``: ``make(*args, folder)``'s result, made once per module (the in-memory releases
    that two tests each compare with; made inside the first test that asks, with its ``small_parts`` sizes)."""
    made: dict[tuple, Any] = {}

    def release(make: Callable[..., Any], *args: Any) -> Any:
        key = (make.__name__, *map(repr, args))
        if key not in made:
            made[key] = make(*args, tmp_path_factory.mktemp("in-memory"))
        return made[key]

    return release


def test_partitioned_build_writes_the_in_memory_release(tmp_path, small_parts, made_once):
    in_memory = made_once(build, "off")
    on_disk = build("on", tmp_path / "on")
    auto = build("auto", tmp_path / "auto")  # 3,000 rows >= min_rows: on disk
    assert [(len(paths), run) for paths, run in small_parts] == [(5, in_process)] * 2  # 3,000 rows in files of 700
    assert verify_release(on_disk) == []
    expected = contents(in_memory)
    assert len([name for name in expected if name.startswith("pool/part-")]) == 8
    assert contents(on_disk) == expected
    assert contents(auto) == expected


@pytest.mark.integration
def test_partitioned_steps_on_two_dask_workers_write_the_in_memory_release(tmp_path, small_parts, made_once):
    in_memory = made_once(build, "off")
    on_dask = release_flow.with_options(task_runner=make_task_runner(dask_workers=2))
    on_disk = Path(on_dask("on", tmp_path / "dask"))
    assert [run for _, run in small_parts] == [run_partition_steps]
    assert contents(on_disk) == contents(in_memory)
    # each step a task run named by its step (Prefect prefixes the task's log lines with it)
    names = task_run_names("release-flow", {"partition-spill_file"})
    assert "partition-spill_file" in names and all(re.fullmatch(r"partition-\w+", n) for n in names), sorted(names)


@pytest.mark.parametrize("mode, rows, expected", [("auto", 9, False), ("auto", 10, True), ("on", 0, True),
                                                  ("off", 10**9, False)])
def test_partition_mode_decides_by_pool_rows(mode, rows, expected):
    assert PartitionConfig(mode=mode, min_rows=10).on_disk(rows) is expected


def test_the_partition_setting_is_not_hashed():
    config = sample_config()
    before = config.config_hash()
    config.partitioned = PartitionConfig(mode="on", min_rows=5)
    assert config.config_hash() == before and "partitioned" not in config.canonical_json()


OLD_SHARD_DROPS = ["kind", "generator_model", "program", "program_output", "similarity", "evidence_object_ids",
                   "task_type", "evidence_region_ids", "is_hallucination"]


def write_shards(pool: pa.Table, question_dir: Path, files: int = 4) -> list[Path]:
    """An empty shard file (a shard of images without questions), then ``pool``'s rows shuffled into
    ``files`` question shard files, the last one without the optional columns (a shard of an older
    generator: it has to be conformed on its way to the pool)."""
    shuffled = pool.take(np.random.default_rng(1).permutation(pool.num_rows))
    folder = question_dir / "questions"
    folder.mkdir(parents=True)
    size = -(-pool.num_rows // files)
    paths = [folder / f"part-{k:05d}.parquet" for k in range(files + 1)]
    pq.write_table(pool.slice(0, 0), paths[0])
    for k, path in enumerate(paths[1:]):
        part = shuffled.slice(k * size, size)
        pq.write_table(part.drop_columns(OLD_SHARD_DROPS) if k == files - 1 else part, path)
    return paths


def verified_rows() -> pa.Table:
    """200 verified questions on other images: a second kind, in memory like the flow's grounded pools."""
    table = synthetic_pool(200, 30, 3, seed=9, image_offset=10_000)
    return table.set_column(table.schema.get_field_index("kind"), "kind", pa.array(["verified"] * 200))


def build_from_shards(mode: str, select: KindSelection, root: Path, min_rows: int = 2_000):
    """The flow's own steps from question shard files: merged_pool, then finish_release."""
    config = sample_config()
    config.partitioned = PartitionConfig(mode=mode, min_rows=min_rows)
    config.select = select
    shards = write_shards(synthetic_pool(3_000, 450, 12, seed=4), root / "work" / "questions")
    report: dict = {}
    pool = merged_pool(root / "work" / "questions", [verified_rows()], config, root / "work", report)
    kind = type(pool)
    release = finish_release(pool, config, root / "out", root / "work", {"source:vg": "sha256:x"}, report, False)
    return release, kind, shards, report["select"]


@pytest.mark.parametrize("select, on_disk_rows", [(KindSelection(), 3_200), (KindSelection(kinds=["template"]), 3_000)])
def test_question_shards_go_to_the_partitioned_path_as_files_and_give_the_in_memory_release(
        tmp_path, small_parts, select, on_disk_rows, made_once):
    in_memory, kind, _, in_memory_report = made_once(build_from_shards, "off", select)
    assert kind is pa.Table and small_parts == []
    on_disk, kind, shards, report = build_from_shards("on", select, tmp_path / "on")
    assert kind is PoolFiles and report == in_memory_report
    (paths, _), = small_parts
    assert paths[:4] == shards[:4]  # shard files in the pool's schema, every row kept: handed over, not copied
    assert [p.parent.name for p in paths[4:]] == ["input"] * (len(paths) - 4)  # conformed or filtered copies
    assert report["questions_in"] == 3_200 and report["questions_out"] == on_disk_rows
    assert contents(on_disk) == contents(in_memory)


def test_a_selection_under_min_rows_falls_back_to_the_in_memory_path(tmp_path, small_parts, made_once):
    select = KindSelection(kinds=["template"])
    in_memory, *_ = made_once(build_from_shards, "off", select)
    auto, kind, _, report = build_from_shards("auto", select, tmp_path / "auto", min_rows=3_100)  # 3,200 in, 3,000 kept
    assert kind is pa.Table and small_parts == [] and report["questions_out"] == 3_000
    assert contents(auto) == contents(in_memory)


def test_merged_pool_files_refuse_a_question_id_twice(tmp_path):
    config = sample_config()
    config.partitioned = PartitionConfig(mode="on")
    write_shards(synthetic_pool(300, 45, 4, seed=4), tmp_path / "questions", files=2)
    twice = pq.read_table(tmp_path / "questions" / "questions" / "part-00001.parquet").slice(0, 1)
    with pytest.raises(ValueError, match="repeats a question_id"):
        merged_pool(tmp_path / "questions", [schemas.conform(twice, schemas.QUESTIONS)], config, tmp_path, {})
