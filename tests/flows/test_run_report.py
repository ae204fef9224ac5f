"""The run report of a build's work folder: totals per stage folder, what of them a release keeps, the newest report."""

import json
import os

import pyarrow as pa

from reasonvqa.flows.run_report import RUN_REPORT, latest_run_report, release_stage_counts, stage_report
from reasonvqa.stage import Rejects, StageResult, run_shard


def shard(stage_dir, number: int, rows_in: int, dropped: int, requests: int = 0) -> None:
    """One finished shard of a stage: ``rows_in`` records, ``dropped`` of them rejected as "no match"."""
    rejects = Rejects("demo", number)
    for k in range(dropped):
        rejects.add("no match", f"in.json#{k}", {"k": k})
    kept = pa.table({"id": list(range(rows_in - dropped))})
    run_shard(stage_dir, number, lambda: StageResult({"rows": kept}, rejects, rows_in, requests=requests))


def test_the_stage_report_sums_each_stage_and_each_source_over_its_units(tmp_path):
    shard(tmp_path / "link", 0, 5, 1, requests=3)
    shard(tmp_path / "link", 1, 4, 0, requests=2)
    shard(tmp_path / "sources_vg" / "unit-00000", 0, 6, 2)
    shard(tmp_path / "sources_vg" / "unit-00001", 1, 3, 0)
    (tmp_path / "_sparql_cache").mkdir()  # neither a stage nor a source: left out
    report = stage_report(tmp_path)
    assert report == {
        "link": {"shards": 2, "rows_in": 9, "rows_out": 8, "rejected": {"no match": 1}, "requests": 5},
        "sources_vg": {"shards": 2, "rows_in": 9, "rows_out": 7, "rejected": {"no match": 2}, "requests": 0},
    }


def test_a_release_keeps_the_counts_without_the_run_dependent_figures():
    report = {"link": {"rows_in": 9, "rows_out": 8, "requests": 5, "cache_hits": 2, "retries": 1, "seconds": 0.4},
              "select": {"questions_in": 10, "questions_out": 7}}
    assert release_stage_counts(report) == {"link": {"rows_in": 9, "rows_out": 8},
                                            "select": {"questions_in": 10, "questions_out": 7}}


def test_the_run_report_is_the_work_folders_own_else_the_newest_build_under_it(tmp_path):
    assert latest_run_report(tmp_path) is None
    for name, mtime in (("aaaa", 2_000_000_000), ("bbbb", 1_000_000_000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / RUN_REPORT).write_text(json.dumps({"build": name}))
        os.utime(tmp_path / name / RUN_REPORT, (mtime, mtime))
    assert latest_run_report(tmp_path) == tmp_path / "aaaa" / RUN_REPORT  # newest, not first by name
    assert latest_run_report(tmp_path / "bbbb") == tmp_path / "bbbb" / RUN_REPORT
