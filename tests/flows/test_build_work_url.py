"""build-reasonvqa with its work folder on S3 (moto's server on 127.0.0.1): the threads runner and a 2-worker
Dask LocalCluster, whose worker processes share nothing with the flow's but the URL (each has its own mirror);
the Dask build also spills its pool to disk (partitioned) and publishes to an fsspec URL (memory://)."""

import json
import re
from pathlib import Path

import fsspec
import pytest

from reasonvqa import workstore
from reasonvqa.flows.config import sample_config
from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from reasonvqa.flows.run_report import latest_run_report, stage_report
from reasonvqa.flows.runners import make_task_runner
from reasonvqa.tasks.balance import partitioned
from reasonvqa.tasks.balance.config import PartitionConfig
from tests.flows.task_runs import task_run_names
from tests.moto_s3 import forget_mirror, s3_filesystem, s3_server
from tests.waiting import until

pytestmark = pytest.mark.integration


def files(release: Path) -> dict[str, bytes]:
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()}


def shard_objects(fs, root: str) -> dict[str, tuple]:
    """Every shard file and marker at the URL, with what changes when it is written again."""
    fs.invalidate_cache()
    return {path: (info["ETag"], info["LastModified"]) for path, info in fs.find(root, detail=True).items()
            if "/_done/" in path or Path(path).name.startswith("part-")}


LOST = ("link/_done/part-00000", "questions/_done/part-00000", "questions/questions/part-00000.parquet",
        "sources_vg/unit-00000/_done/ALL", "sources_vg/unit-00000/images/part-00000.parquet")


def lose_shards(fs, root: str) -> None:
    """Delete the objects of link and questions shard 0, and a source unit's images shard and marker, at
    the URL (as an operator cleaning up, or a lifecycle rule, would)."""
    for path in fs.find(root):
        name = path.split(f"{root}/", 1)[1]
        if name in LOST or (name.startswith(("link/", "questions/")) and Path(name).name.startswith("part-00000")):
            fs.rm_file(path)


@pytest.fixture(scope="module")
def builds(tmp_path_factory, sample_release):
    root = tmp_path_factory.mktemp("url-builds")
    with s3_server("builds"), pytest.MonkeyPatch.context() as patch:
        local = sample_release
        on_url = Path(build_reasonvqa(sample_config(), str(root / "url"), "s3://builds/work"))
        fs = s3_filesystem()
        before = shard_objects(fs, "builds/work")
        forget_mirror(patch)
        again = Path(build_reasonvqa(sample_config(), str(root / "again"), "s3://builds/work"))
        after = shard_objects(fs, "builds/work")
        mirrors_left = sorted(p.name for p in workstore.mirror_base().iterdir())
        # shards deleted at the URL, then a rebuild in the same process (as `serve` or a Dask worker would)
        lose_shards(fs, "builds/work")
        rebuilt = Path(build_reasonvqa(sample_config(), str(root / "rebuilt"), "s3://builds/work"))
        restored = shard_objects(fs, "builds/work")
        # on Dask: the shard tasks on 2 worker processes; balance and split from disk (partitioned) run in the
        # flow's process, whose mirror holds the pool's files (its steps share spill files through that disk)
        on_dask = build_reasonvqa.with_options(task_runner=make_task_runner(dask_workers=2))
        config = sample_config()
        config.partitioned = PartitionConfig(mode="on")
        patch.setattr(partitioned, "INPUT_ROWS_PER_FILE", 40)
        patch.setattr(partitioned, "ROWS_PER_FILE", 30)
        flow_markers: list[Path] = []
        forget = workstore.forget

        def markers_then_forget(path: Path) -> None:  # what the flow's mirror held when the build ended
            flow_markers.extend(p for p in workstore.rebase(Path(path)).rglob("*") if "_done" in p.parts)
            forget(path)

        with pytest.MonkeyPatch.context() as flow_only:
            flow_only.setattr(workstore, "forget", markers_then_forget)
            # published to an fsspec URL (memory://): the release must not depend on that either
            dask_url = on_dask(config, "memory://builds/dask", "s3://builds/dask-work")
        dask = root / "dask" / "reasonvqa-sample" / "0.1.0"
        memory, memory_path = fsspec.core.url_to_fs(dask_url)
        memory.get(memory_path, str(dask), recursive=True)
        # the workers wrote every marker in mirrors of their own: the flow's process only asked the URL
        local_work = next((local.parents[1] / ".work").iterdir())
        yield {"local": local, "local_work": local_work, "url": on_url, "again": again, "dask": dask, "dask_url": dask_url,
               "before": before,
               "after": after, "rebuilt": rebuilt, "restored": restored, "mirrors_left": mirrors_left,
               "dask_objects": shard_objects(fs, "builds/dask-work"), "lease": fs.exists("builds/work/.lock"),
               "stats_objects": [p for p in fs.find("builds") if "/stats/" in p],
               "flow_markers": flow_markers}


def test_a_url_work_folder_gives_the_local_release_byte_for_byte_on_threads_and_dask(builds):
    assert builds["local"].parts[-2:] == ("reasonvqa-sample", "0.1.0")
    assert builds["dask_url"] == "memory://builds/dask/reasonvqa-sample/0.1.0"
    local = files(builds["local"])
    assert len(local) > 20
    for name in ("url", "again", "rebuilt", "dask"):
        theirs = files(builds[name])
        assert sorted(theirs) == sorted(local), name
        assert [f for f in local if local[f] != theirs[f]] == [], name


def test_task_runs_are_named_by_stage_and_shard(builds):
    # Prefect prefixes each task's log lines with its run's name: "link-shard-00003", not "link-shard-7c3" (this
    # module's builds; partition steps as Dask tasks: test_build_partitioned.py)
    expected = {"read-vg-unit-00000", "read-gldv2-unit-00000", "link-shard-00000", "facts-shard-00000",
                "questions-shard-00000", "grounded-shard-00000"}
    names = task_run_names("build-reasonvqa", expected)
    assert expected <= names, sorted(names)
    unnamed = {n for n in names if not re.fullmatch(r"(read-\w+-unit|[a-z-]+-shard)-\d{5}|partition-\w+", n)}
    assert not unnamed, sorted(unnamed)


def test_every_shard_and_marker_lives_at_the_url(builds):
    markers = sorted(p.split("/work/", 1)[1] for p in builds["before"] if "/_done/" in p)
    assert {m.split("/_done/")[0] for m in markers} == {
        "sources_vg/unit-00000", "sources_gldv2/unit-00000", "sources_sa1b/unit-00000", "sources_nuscenes/unit-00000",
        "grounded", "link", "facts", "questions"}
    assert "link/_done/part-00003" in markers and "questions/_done/part-00003" in markers
    dask = sorted(p.split("/dask-work/", 1)[1] for p in builds["dask_objects"])
    assert dask == sorted(p.split("/work/", 1)[1] for p in builds["before"])  # the same shards, by the workers
    assert builds["flow_markers"] == []
    assert not builds["lease"]  # released when the build ended
    assert builds["stats_objects"] == []  # the release's stats are not uploaded: nothing reads them there


def test_a_rerun_from_an_empty_mirror_reuses_every_shard(builds):
    assert builds["after"] == builds["before"]  # no shard file or marker was written again


def test_the_stage_report_and_the_run_report_are_read_at_the_url(builds, monkeypatch):
    forget_mirror(monkeypatch)  # as `reasonvqa` in a new process, or on another machine
    work = workstore.local_path("s3://builds/work", workstore.new_build())
    report = stage_report(work)
    assert report == stage_report(builds["local_work"])
    assert {"sources_vg", "sources_gldv2", "link", "facts", "questions", "grounded"} <= set(report)
    assert report["questions"]["shards"] == 4 and report["questions"]["rows_out"] > 0
    run_report = latest_run_report(work)
    assert run_report == work / "run_report.json"
    assert json.loads(run_report.read_text()) == json.loads((builds["local_work"] / "run_report.json").read_text())
    assert latest_run_report(builds["local"].parents[1] / ".work") == builds["local_work"] / "run_report.json"


def test_shards_deleted_at_the_url_are_computed_again_by_a_rebuild_in_the_same_process(builds):
    restored = {p.split("/work/", 1)[1] for p in builds["restored"]}
    assert set(LOST) <= restored
    assert sorted(restored) == sorted(p.split("/work/", 1)[1] for p in builds["before"])
    # the rest was reused: only the lost shards, and what was built from the unit read again, were written
    unchanged = [p for p in builds["before"] if builds["restored"][p] == builds["before"][p]]
    assert "builds/work/facts/_done/part-00000" in unchanged


def test_each_build_mirror_is_removed_when_the_build_ends(builds):
    assert builds["mirrors_left"] == []


def lost(still_held) -> bool:
    """Whether the build's lease check (called between stages) says the lease is lost."""
    from reasonvqa import lease

    try:
        still_held()
    except lease.LeaseLost:
        return True
    return False


def test_a_build_whose_lease_is_taken_over_fails_at_the_next_stage_boundary_naming_it(tmp_path, monkeypatch):
    import json

    from reasonvqa import lease
    from reasonvqa.flows import build_reasonvqa as flow_module

    def stages(config, out_dir, work_dir, inputs, overwrite, as_of, still_held, recorded=None):
        s3_filesystem().pipe_file("lost/work/.lock", json.dumps({"owner": "thief:1:x", "ttl": 60}).encode())
        until(lambda: lost(still_held), what="the next renewal finds the other build's lease")
        still_held()  # the check between two stages
        pytest.fail("the build went on after losing its lease")

    monkeypatch.setattr(lease, "TTL_S", 0.6)
    monkeypatch.setattr(flow_module, "_build_in", stages)
    with s3_server("lost"):
        with pytest.raises(lease.LeaseLost, match=r"^build work folder s3://lost/work: this build \(.+\) lost its "
                                                  r"lease s3://lost/work/.lock \(another build replaced or removed it\)"):
            build_reasonvqa(sample_config(), str(tmp_path / "out"), "s3://lost/work")
        assert json.loads(s3_filesystem().cat_file("lost/work/.lock"))["owner"] == "thief:1:x"
