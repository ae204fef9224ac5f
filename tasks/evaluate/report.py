"""The evaluation report: written as JSON, drawn as one table (rich) with each kind's paper metric, n and its
95 % interval, broken down as the paper does (ReasonVQA per hop; VistaQA per task type, visual domain and
hallucination subset)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

# the paper's headline metric of each kind and the breakdowns drawn (the JSON holds every one)
HEADLINE = {"ReasonVQA": ["multiple_choice", "open_ended"], "VistaQA": ["grove", "s_a", "s_m"], "PROVE": ["hscore", "tscore"]}
DRAWN_BREAKDOWNS = {"ReasonVQA": [("by_hop", "hop", "multiple_choice")],
                    "VistaQA": [("by_task_type", "task", "grove"), ("by_visual_domain", "domain", "grove"),
                                ("by_hallucination", "", "grove")]}
LABELS = {"multiple_choice": "MC accuracy", "open_ended": "open accuracy", "grove": "Grove",
          "s_a": "T (mean S_a)", "s_m": "M (mean S_m)", "hscore": "hscore", "tscore": "tscore"}


def write_report(report: dict, path: Path) -> None:
    """The report as indented, key-sorted JSON (a folder made for it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _cell(summary: dict) -> tuple[str, str, str]:
    value, ci = summary.get("value"), summary.get("ci95")
    return ("-" if value is None else f"{100 * value:.1f}", str(summary.get("n", 0)),
            "-" if not ci else f"{100 * ci[0]:.1f}-{100 * ci[1]:.1f}")


def report_table(report: dict, title: str | None = None) -> Table:
    """The one-screen table of a report (scores in percent, as the papers print them)."""
    table = Table(title=title or f"{report['predictions']} on {report['split']} ({report['scored']}/{report['questions']} scored)")
    for column, justify in (("kind", "left"), ("metric", "left"), ("group", "left"), ("score %", "right"),
                            ("n", "right"), ("95% CI", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]  # rich's JustifyMethod literal
    for kind, entry in report["kinds"].items():
        paper = entry.get("paper", "")
        if not entry.get("metrics"):
            table.add_row(kind, entry.get("note", "not scored"), "", "-", str(entry["scored"]), "-")
            continue
        for metric in HEADLINE.get(paper, []):
            if metric in entry["metrics"]:
                table.add_row(f"{kind} ({paper})", LABELS[metric], "all", *_cell(entry["metrics"][metric]))
        for key, prefix, metric in DRAWN_BREAKDOWNS.get(paper, []):
            for group, metrics in entry.get(key, {}).items():
                table.add_row(kind, LABELS[metric], f"{prefix} {group}".strip(), *_cell(metrics[metric]))
    return table


def problem_line(report: dict) -> str:
    """One line counting the problems of the predictions file (each named in the JSON's problem_lines)."""
    counts = {k: v for k, v in report["problems"].items() if v}
    if not counts:
        return "predictions: no problems"
    return "predictions not scored: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + " (problem_lines in the JSON report)"


def print_report(report: dict, console: Console | None = None) -> None:
    """Draw the table and the problem line."""
    console = console or Console(width=100)
    console.print(report_table(report))
    console.print(problem_line(report))
