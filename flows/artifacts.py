"""Publish a release's counts, statistics and plots as Prefect artifacts."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from prefect.artifacts import create_markdown_artifact, create_table_artifact

MAX_EMBEDDED_PLOT_BYTES = 400_000  # larger plots are linked by path, not embedded


def release_summary_markdown(release: Path) -> str:
    """The release's stats/SUMMARY.md with its PNG links turned into embedded images."""
    manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
    lines = [f"# {manifest['name']} {manifest['version']}", "", f"Release folder: `{release}`", ""]
    summary = release / "stats" / "SUMMARY.md"
    if not summary.exists():
        return "\n".join(lines)
    text = summary.read_text(encoding="utf-8")

    def embed(match: re.Match) -> str:
        plot = release / "stats" / match.group(2)
        if plot.suffix != ".png" or not plot.is_file() or plot.stat().st_size > MAX_EMBEDDED_PLOT_BYTES:
            return f"{match.group(1)} (`{plot}`)"
        data = base64.b64encode(plot.read_bytes()).decode()
        return f"{match.group(1)}\n\n![{match.group(1)}](data:image/png;base64,{data})"

    return "\n".join(lines) + re.sub(r"\[([^\]]+)\]\(([^)]+)\)", embed, text)


def publish_artifacts(release: Path) -> None:
    """A table artifact of counts per split and a markdown artifact of the stats and plots."""
    manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
    key = re.sub(r"[^a-z0-9-]+", "-", manifest["name"].lower()).strip("-")
    create_table_artifact(
        [{"split": split, "questions": n} for split, n in manifest["counts"].items()],
        key=f"{key}-counts", description=f"Questions per split of {manifest['name']} {manifest['version']}",
    )
    create_markdown_artifact(release_summary_markdown(release), key=f"{key}-stats",
                             description=f"Statistics of {manifest['name']} {manifest['version']}")


def publish_run_report(report: dict[str, dict]) -> None:
    """A table artifact of this run's per-stage figures, requests included (they stay out of the release)."""
    rows = [{"stage": stage, **{k: json.dumps(v) if isinstance(v, dict) else v for k, v in totals.items()}}
            for stage, totals in sorted(report.items())]
    create_table_artifact(rows, key="build-run-report", description="Per-stage rows, rejects and requests of this run")
