from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import workstore
from reasonvqa.stage import Rejects, StageResult, is_done, read_table, run_shard, stage_stats
from reasonvqa.storage import work_folder
from tests.moto_s3 import s3_filesystem, s3_server


@pytest.fixture(scope="module")
def s3():
    with s3_server("unit") as endpoint:
        yield endpoint


def test_a_path_from_another_process_mirror_is_rebased_onto_this_one(tmp_path):
    foreign = Path("/tmp/rvqa-mirror.abc123/build-b1/s3/bucket/work/link/_done/part-00001")
    assert workstore.rebase(foreign) == workstore.mirror_base() / "build-b1/s3/bucket/work/link/_done/part-00001"
    assert workstore.rebase([tmp_path, {"k": (foreign,)}]) == [tmp_path, {"k": (workstore.rebase(foreign),)}]


def test_scratch_is_shared_by_builds_outside_every_mirror_and_a_local_path_is_its_own(tmp_path):
    first = workstore.local_path("s3://bucket/work", "b1") / "grounded"
    second = workstore.local_path("s3://bucket/work", "b2") / "grounded"
    kept = workstore.scratch(first)
    assert kept == workstore.scratch(second)  # a later build in this process finds what an earlier one kept
    assert kept.parts[-4:] == ("s3", "bucket", "work", "grounded")
    assert not workstore.is_mirrored(kept) and workstore.remote(kept) is None  # never uploaded, never forgotten
    workstore.forget(first)
    kept.mkdir(parents=True)
    workstore.forget(second)
    assert kept.is_dir()
    assert workstore.scratch(tmp_path / "work") == tmp_path / "work"


def test_url_of_names_the_url_a_mirror_path_stands_for():
    assert workstore.url_of(workstore.local_path("s3://bucket/work", "b1") / "run_report.json") == \
        "s3://bucket/work/run_report.json"
    assert workstore.url_of(Path("/data/work/run_report.json")) == "/data/work/run_report.json"


def test_a_shard_goes_to_the_url_and_another_mirror_reads_it_back(s3, tmp_path, monkeypatch):
    stage_dir = work_folder("s3://unit/w1", "b1") / "link"
    result = StageResult({"picked": pa.table({"qid": ["Q90", "Q64"]})}, Rejects("link", 3), rows_in=2)
    stats = run_shard(stage_dir, 3, lambda: result)
    fs = s3_filesystem()
    assert sorted(fs.find("unit/w1")) == ["unit/w1/link/_done/part-00003", "unit/w1/link/_rejects/part-00003.parquet",
                                          "unit/w1/link/_stats/part-00003.json",
                                          "unit/w1/link/picked/part-00003.parquet"]
    monkeypatch.setattr(workstore, "_base", None)  # a new process: an empty mirror of its own
    other = workstore.rebase(stage_dir)  # the same build's path, in that process
    assert other != stage_dir and not other.exists()
    assert is_done(other, 3) and not is_done(other, 4)
    assert stage_stats(other) == [stats]
    assert read_table(other, "picked")["qid"].to_pylist() == ["Q90", "Q64"]
    assert run_shard(other, 3, lambda: pytest.fail("a finished shard is computed again")) == stats


def test_a_marker_deleted_at_the_url_is_not_done_though_this_process_holds_a_copy(s3):
    stage_dir = work_folder("s3://unit/w7", "b1") / "link"
    run_shard(stage_dir, 0, lambda: StageResult({"picked": pa.table({"qid": ["Q1"]})}, Rejects("link", 0), rows_in=1))
    s3_filesystem().rm("unit/w7/link", recursive=True)
    assert (stage_dir / "_done" / "part-00000").exists()
    assert not is_done(stage_dir, 0)
    computed = []
    run_shard(stage_dir, 0, lambda: computed.append(1) or StageResult(
        {"picked": pa.table({"qid": ["Q1"]})}, Rejects("link", 0), rows_in=1))
    assert computed == [1] and s3_filesystem().exists("unit/w7/link/_done/part-00000")


def test_each_build_reads_through_a_mirror_of_its_own_that_forget_removes(s3):
    from reasonvqa.stage import write_parquet

    first = work_folder("s3://unit/w8", "b1") / "images" / "part-00000.parquet"
    write_parquet(pa.table({"image_id": ["old"]}), first)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"image_id": ["new"]}), sink)
    s3_filesystem().pipe_file("unit/w8/images/part-00000.parquet", sink.getvalue().to_pybytes())
    second = work_folder("s3://unit/w8", "b2") / "images" / "part-00000.parquet"
    assert read_table(second.parent.parent, "images")["image_id"].to_pylist() == ["new"]
    workstore.forget(first)
    assert not (workstore.mirror_base() / "build-b1").exists() and second.exists()
    workstore.forget(workstore.rebase(Path("/tmp/rvqa-mirror.other/build-b2/s3/unit/w8")))
    assert not (workstore.mirror_base() / "build-b2").exists()


def test_the_marker_is_put_after_the_shard_outputs(s3, monkeypatch):
    order = []
    monkeypatch.setattr(workstore, "push", lambda path: order.append(Path(path).parent.name))
    run_shard(work_folder("s3://unit/w2", "b1") / "facts", 0,
              lambda: StageResult({"picked": pa.table({"x": [1]})}, Rejects("facts", 0), rows_in=1))
    assert order == ["picked", "_rejects", "_stats", "_done"]


def test_a_task_in_another_process_gets_the_current_version_of_a_rewritten_file(s3, monkeypatch):
    from reasonvqa.stage import write_parquet

    facts = work_folder("s3://unit/w6", "b1") / "facts_merged.parquet"
    write_parquet(pa.table({"qid": ["Q1"]}), facts)  # the flow's process, first build
    seen = []
    task = workstore.portable(lambda path: seen.append(pq.read_table(path)["qid"].to_pylist()))
    monkeypatch.setattr(workstore, "_base", None)  # a long-lived worker with a mirror of its own
    task(facts)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"qid": ["Q2"]}), sink)
    s3_filesystem().pipe_file("unit/w6/facts_merged.parquet", sink.getvalue().to_pybytes())  # the next build's
    task(facts)
    task(facts)
    assert seen == [["Q1"], ["Q2"], ["Q2"]]


def test_a_file_this_process_put_is_not_downloaded_again_by_a_task_here(s3, monkeypatch):
    from reasonvqa.stage import write_parquet

    facts = work_folder("s3://unit/w9", "b1") / "facts_merged.parquet"
    write_parquet(pa.table({"qid": ["Q1"]}), facts)
    gets = []
    monkeypatch.setattr(workstore, "_download", lambda fs, keys, targets: gets.append(keys))
    workstore.portable(lambda path: None)(facts)
    workstore.portable(lambda path: None)(facts)
    assert gets == []


def test_refresh_removes_the_copy_of_a_file_the_url_no_longer_has(s3):
    from reasonvqa.stage import write_parquet

    corpus = work_folder("s3://unit/w10", "b1") / "corpus_labels.parquet"
    write_parquet(pa.table({"label": ["dog"]}), corpus)
    s3_filesystem().rm_file("unit/w10/corpus_labels.parquet")
    workstore.refresh(corpus)
    assert not corpus.exists()


def test_rebase_reaches_str_paths_nested_dataclasses_and_pydantic_models():
    from dataclasses import dataclass

    from pydantic import BaseModel

    @dataclass(frozen=True)
    class Inner:
        path: str
        files: list

    @dataclass
    class Outer:
        inner: Inner
        n: int

    class Settings(BaseModel):
        cache_dir: Path
        name: str = "x"

    foreign = "/tmp/rvqa-mirror.abc123/build-b1/s3/bucket/work"
    here = workstore.mirror_base() / "build-b1/s3/bucket/work"
    moved = workstore.rebase(Outer(Inner(foreign + "/facts.parquet", [Path(foreign) / "a.parquet"]), 3))
    assert moved == Outer(Inner(str(here / "facts.parquet"), [here / "a.parquet"]), 3)
    assert workstore.rebase(Settings(cache_dir=Path(foreign))).cache_dir == here
    kept = Outer(Inner("/data/x", [Path("/data/y")]), 1)
    assert workstore.rebase(kept) is kept


def test_a_task_gets_the_current_version_of_a_file_nested_in_its_arguments(s3, monkeypatch):
    from dataclasses import dataclass

    from reasonvqa.stage import write_parquet

    @dataclass
    class Inputs:
        facts: Path

    facts = work_folder("s3://unit/w11", "b1") / "facts_merged.parquet"
    write_parquet(pa.table({"qid": ["Q1"]}), facts)
    monkeypatch.setattr(workstore, "_base", None)  # a worker with a mirror of its own
    seen = []
    workstore.portable(lambda inputs: seen.append(pq.read_table(inputs[0].facts)["qid"].to_pylist()))([Inputs(facts)])
    assert seen == [["Q1"]]
