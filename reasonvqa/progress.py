"""Progress bars for long stages and the one-screen summary a CLI command ends with (rich, on stderr).

The flows report through ``stage(name, total)``; nothing is shown unless a command turned the
bars on with ``bars()`` (the CLI on a terminal), so deployments and tests stay quiet.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

_active: Progress | None = None
_lock = threading.Lock()
console = Console(stderr=True)


@contextlib.contextmanager
def bars(enabled: bool = True) -> Iterator[None]:
    """Show a bar per stage reported with ``stage`` inside the block (when ``enabled`` and on a terminal)."""
    global _active
    if not enabled or not console.is_terminal:
        yield
        return
    with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        _active = progress
        try:
            yield
        finally:
            _active = None


def _no_bar(n: int = 1) -> None:
    """``advance`` when no bars are shown: nothing to do."""


@contextlib.contextmanager
def stage(name: str, total: int) -> Iterator[Callable[[int], None]]:
    """A bar of ``total`` units for stage ``name``; yields ``advance(n)`` (a no-op without bars)."""
    progress = _active
    if progress is None:
        yield _no_bar
        return
    task = progress.add_task(name, total=total)

    def advance(n: int = 1) -> None:
        with _lock:
            progress.advance(task, n)

    yield advance


def build_summary(release: Path, report_file: Path | None) -> Table:
    """One screen after a build: questions per split and table, knowledge date, rows and rejects per stage."""
    manifest = json.loads((release / "manifest.json").read_text(encoding="utf-8"))
    table = Table(title=f"{manifest['name']} {manifest['version']}  ({release})", show_lines=False)
    for column in ("stage / split", "rows in", "rows out", "rejected", "requests"):
        table.add_column(column, justify="left" if column == "stage / split" else "right")
    report = json.loads(report_file.read_text(encoding="utf-8")) if report_file and report_file.exists() else {}
    for name, totals in sorted(report.items()):
        rejected = totals.get("rejected", "")
        rejected = sum(rejected.values()) if isinstance(rejected, dict) else rejected
        table.add_row(name, str(totals.get("rows_in", "")), str(totals.get("rows_out", "")), str(rejected),
                      str(totals.get("requests", "")))
    table.add_section()
    for split, count in manifest["counts"].items():
        table.add_row(split, "", str(count), "", "")
    table.caption = (f"knowledge as of {manifest['inputs'].get('knowledge_date', 'n/a')}; "
                     f"content {manifest.get('content_hash', 'n/a')[:19]}; `reasonvqa verify {release}` checks it")
    return table

