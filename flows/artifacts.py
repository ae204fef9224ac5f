"""Publish a release's counts, statistics and plots as Prefect artifacts, under keys of the flow that wrote it.

Keys are ``<flow>-<release name>-counts`` and ``<flow>-<release name>-stats`` (``build-reasonvqa-sample-counts``,
``resplit-reasonvqa-sample-stats``), so the UI's latest artifact of a key is that flow's latest release. Plots
are linked by their file's URI, not embedded: the stats artifact stays a few KB (embedded, the sample's five
PNGs made it about 314 KB).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from prefect.artifacts import create_markdown_artifact, create_table_artifact

Publisher = Literal["build", "resplit"]  # the flows that write releases


def artifact_key(publisher: Publisher, release_name: str, what: str) -> str:
    """``<publisher>-<release name as a key>-<what>`` (lowercase letters, digits and dashes, as Prefect requires)."""
    name = re.sub(r"[^a-z0-9-]+", "-", release_name.lower()).strip("-")
    return f"{publisher}-{name}-{what}"


def counted_as(folder: str) -> str:
    """What a manifest count of ``folder`` counts: questions for the splits and the pool, else the table's records."""
    return folder if folder in ("images", "regions") else "questions"


def counts_rows(manifest: dict) -> list[dict]:
    """One row per release folder: its name, what its rows are (questions, images, regions) and how many; the
    splits first (in the manifest's order), then the pool, then the record tables."""
    counts = manifest["counts"]
    first = [folder for folder in [*manifest.get("splits", []), "pool"] if folder in counts]
    order = first + sorted(set(counts) - set(first))
    return [{"folder": folder, "counts": counted_as(folder), "rows": counts[folder]} for folder in order]


def release_summary_markdown(release: Path) -> str:
    """The release's stats/SUMMARY.md with each linked file given as its file URI (plots are not embedded)."""
    manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
    lines = [f"# {manifest['name']} {manifest['version']}", "", f"Release folder: `{release}`", ""]
    summary = release / "stats" / "SUMMARY.md"
    if not summary.exists():
        return "\n".join(lines)
    text = summary.read_text(encoding="utf-8")

    def link(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # already a URL
            return match.group(0)
        return f"[{match.group(1)}]({(release / 'stats' / target).resolve().as_uri()})"

    return "\n".join(lines) + re.sub(r"\[([^\]]+)\]\(([^)]+)\)", link, text)


def publish_artifacts(release: Path, publisher: Publisher) -> None:
    """A table artifact of the release's row counts per folder and a markdown artifact of its stats and plots."""
    manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
    title = f"{manifest['name']} {manifest['version']}"
    create_table_artifact(counts_rows(manifest), key=artifact_key(publisher, manifest["name"], "counts"),
                          description=f"Rows per folder of {title} ({publisher}): questions per split and in the "
                                      "pool, images, regions")
    create_markdown_artifact(release_summary_markdown(release), key=artifact_key(publisher, manifest["name"], "stats"),
                             description=f"Statistics of {title} ({publisher})")


def publish_run_report(report: dict[str, dict]) -> None:
    """A table artifact of this run's per-stage figures, requests included (they stay out of the release)."""
    rows = [{"stage": stage, **{k: json.dumps(v) if isinstance(v, dict) else v for k, v in totals.items()}}
            for stage, totals in sorted(report.items())]
    create_table_artifact(rows, key="build-run-report", description="Per-stage rows, rejects and requests of this run")
