"""The blind baselines' figures for a release's card: ``evaluation.json`` and a markdown card section.

They are written beside the release, not into it, so its manifest and checksums stay valid; the section is
what a publisher appends to the card (docs/evaluation.md, "On the card").
"""

from __future__ import annotations

import json
from pathlib import Path

from reasonvqa.tasks.evaluate.report import HEADLINE, LABELS

SECTION_TITLE = "## Blind baselines"


def headline_rows(reports: dict[str, dict]) -> list[dict]:
    """(baseline, kind, paper, metric, value, n, ci95) of each report's headline metrics."""
    rows = []
    for baseline, report in reports.items():
        for kind, entry in report["kinds"].items():
            for metric in HEADLINE.get(entry.get("paper", ""), []):
                summary = entry.get("metrics", {}).get(metric)
                if summary:
                    rows.append({"baseline": baseline, "kind": kind, "paper": entry["paper"], "metric": metric,
                                 "value": summary["value"], "n": summary["n"], "ci95": summary["ci95"]})
    return rows


def card_section(reports: dict[str, dict], split: str) -> str:
    """The markdown section: one row per baseline, kind and headline metric (percent, n, 95 % interval)."""
    lines = [SECTION_TITLE, "",
             f"What a model that never sees the image scores on the `{split}` split (`reasonvqa evaluate RELEASE "
             "--baseline NAME`; scores in percent, 95 % bootstrap interval):", "",
             "| baseline | kind | metric | score % | n | 95% CI |", "|---|---|---|---:|---:|---:|"]
    for row in headline_rows(reports):
        value = "-" if row["value"] is None else f"{100 * row['value']:.1f}"
        ci = "-" if not row["ci95"] else f"{100 * row['ci95'][0]:.1f}-{100 * row['ci95'][1]:.1f}"
        lines.append(f"| {row['baseline']} | {row['kind']} ({row['paper']}) | {LABELS[row['metric']]} | {value} | "
                     f"{row['n']} | {ci} |")
    return "\n".join(lines) + "\n"


def write_card_figures(reports: dict[str, dict], split: str, folder: Path) -> list[Path]:
    """``folder/evaluation.json`` (headline rows and the full reports) and ``folder/evaluation.md``."""
    folder.mkdir(parents=True, exist_ok=True)
    figures = folder / "evaluation.json"
    figures.write_text(json.dumps({"split": split, "headline": headline_rows(reports), "reports": reports},
                                  indent=2, sort_keys=True) + "\n", encoding="utf-8")
    section = folder / "evaluation.md"
    section.write_text(card_section(reports, split), encoding="utf-8")
    return [figures, section]
