"""A build's run report: totals per stage folder of its work directory, and what of them a release keeps.

``<work>/run_report.json`` holds every figure, run-dependent ones included (requests, cache hits,
retries, seconds); the release's ``stats/stages.json`` holds ``release_stage_counts`` only, so the
same inputs give the same release bytes.
"""

from __future__ import annotations

from pathlib import Path

from reasonvqa.shards import source_stats, unit_dirs
from reasonvqa.stage import fetched, stage_stats, summarize
from reasonvqa.work_files import files, subfolders

RUN_REPORT = "run_report.json"
RUN_DEPENDENT = ("requests", "cache_hits", "retries", "seconds", "cpu_seconds")  # vary with cache state and machine


def release_stage_counts(report: dict[str, dict]) -> dict[str, dict]:
    """Per-stage totals without the run-dependent figures: what a release may hold (same inputs, same bytes)."""
    return {stage: {k: v for k, v in totals.items() if k not in RUN_DEPENDENT} for stage, totals in report.items()}


def stage_report(work_dir: Path) -> dict[str, dict]:
    """Totals per stage folder of a build's work directory (a source's units summed under its folder);
    a work folder URL's mirror is read at the URL."""
    report = {}
    for folder in subfolders(work_dir, ""):
        if any(d.name == "_stats" for d in subfolders(folder, "_stats")):
            report[folder.name] = summarize(stage_stats(folder))
        elif unit_dirs(folder):
            report[folder.name] = summarize(source_stats(folder))
    return report


def latest_run_report(work: Path) -> Path | None:
    """The run report of a build's work folder, else the newest of the builds' under it (``OUT/.work``),
    present locally (fetched from a work folder URL); None when there is none."""
    found = files(work, RUN_REPORT) or [
        report for folder in subfolders(work, "") for report in files(folder, RUN_REPORT)]
    return max(fetched(found), key=lambda p: p.stat().st_mtime, default=None)
