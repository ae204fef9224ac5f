import io
import json

from rich.console import Console

from reasonvqa import progress


def test_stage_is_a_no_op_without_bars(capsys):
    assert progress._active is None
    with progress.stage("link", 3) as advance:
        assert advance(1) is None and advance() is None
    with progress.bars(enabled=False), progress.stage("link", 3) as advance:
        assert progress._active is None  # bars turned off: still no Progress
        advance(3)
    assert capsys.readouterr() == ("", "")  # nothing shown on stdout or stderr


def test_stage_advances_its_bar_when_bars_are_on(monkeypatch):
    screen = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=screen, force_terminal=True, width=100))
    with progress.bars():
        shown = progress._active
        assert shown is not None
        with progress.stage("link", 3) as advance:
            advance(2)
            advance()
        (task,) = shown.tasks
        assert (task.description, task.total, task.completed) == ("link", 3, 3)
    assert progress._active is None and "link" in screen.getvalue() and "3/3" in screen.getvalue()


def test_summary_lists_stages_splits_and_the_knowledge_date(tmp_path):
    release = tmp_path / "demo" / "1.0.0"
    release.mkdir(parents=True)
    (release / "manifest.json").write_text(json.dumps({
        "name": "demo", "version": "1.0.0", "counts": {"train": 30, "test": 10, "pool": 45},
        "inputs": {"knowledge_date": "2026-03-01"}, "content_hash": "sha256:" + "ab" * 32}))
    report = tmp_path / "run_report.json"
    report.write_text(json.dumps({"link": {"rows_in": 12, "rows_out": 10, "rejected": {"no_item": 2}, "requests": 4}}))
    console = Console(file=io.StringIO(), width=120)
    console.print(progress.build_summary(release, report))
    text = console.file.getvalue()
    assert "demo 1.0.0" in text and "knowledge as of 2026-03-01" in text
    link = next(line for line in text.splitlines() if "link" in line)
    assert [cell.strip() for cell in link.split("│")[2:6]] == ["12", "10", "2", "4"]  # rows in, out, rejected, requests
    assert any("train" in line and "30" in line for line in text.splitlines())
