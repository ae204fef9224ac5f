"""The review round trip on the sample release, as a reviewer runs it: export a Label Studio batch of the
counting questions, change an answer from 1 to 2, import, re-split with the decisions. The published
release verifies: the correction is applied with the reviewer's drawn box, or set aside with its reason."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reasonvqa.flows.cli import app
from reasonvqa.tasks.release.reader import read_release
from reasonvqa.tasks.release.verify import verify_release

runner = CliRunner()


@pytest.fixture
def sample(sample_release) -> Path:
    """The session's sample build (tests/conftest.py), read only: exports, stores and re-splits go to tmp_path."""
    return sample_release


def corrected(tmp_path: Path, sample: Path, store: Path, draw: bool) -> tuple[Path, str]:
    """Export the sample's counting questions, answer the first '1' with '2' (drawing a second box when
    ``draw``), import; return (the export file, the question id)."""
    done = runner.invoke(app, ["export", "--format", "labelstudio", "--source", str(sample), "--size", "20",
                               "--task-types", "counting", "--kinds", "grounded", "--no-hallucination",
                               "--out", str(tmp_path / "batch"), "--store", str(store)])
    assert done.exit_code == 0, done.output
    task = next(t for t in json.loads((tmp_path / "batch" / "tasks.json").read_text()) if t["data"]["answer"] == "1")
    results = task["predictions"][0]["result"]
    next(r for r in results if r["from_name"] == "answer")["value"]["text"] = ["2"]
    if draw:
        width, height = task["data"]["reasonvqa"]["width"], task["data"]["reasonvqa"]["height"]
        results.append({"id": "drawn", "from_name": "box", "to_name": "image", "type": "rectanglelabels",
                        "original_width": width, "original_height": height,
                        "value": {"x": 1.0, "y": 1.0, "width": 3.0, "height": 3.0, "rotation": 0, "rectanglelabels": ["region"]}})
    export = tmp_path / "export.json"
    export.write_text(json.dumps([{"id": 501, "data": task["data"], "annotations": [
        {"id": 1, "completed_by": 3, "was_cancelled": False, "result": results,
         "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:00Z"}]}]))
    imported = runner.invoke(app, ["import", str(export), "--format", "labelstudio", "--store", str(store)])
    assert imported.exit_code == 0 and json.loads(imported.stdout)["rejected"] == {}, imported.output
    return export, task["data"]["reasonvqa"]["question_id"]


def resplit_with(sample: Path, store: Path, out: Path) -> Path:
    done = runner.invoke(app, ["resplit", str(sample), "--out", str(out), "--decisions", str(store)])
    assert done.exit_code == 0, done.output
    return Path(done.stdout.strip().splitlines()[-1])


def test_a_count_changed_from_1_to_2_alone_is_set_aside_and_the_release_verifies(sample, tmp_path):
    store = tmp_path / "store"
    _, qid = corrected(tmp_path, sample, store, draw=False)
    release = resplit_with(sample, store, tmp_path / "next")
    assert verify_release(release) == []
    assert qid not in set(read_release(release).pool["question_id"].to_pylist())
    listed = json.loads((release / "stats" / "annotation_decisions.json").read_text())
    assert [(a["question_id"], a["reason"], a["answer"], a["evidence_regions"]) for a in listed["set_aside"]] == [
        (qid, "count edited without evidence", "2", 1)]


def test_a_count_changed_from_1_to_2_with_a_drawn_box_is_applied_and_the_release_verifies(sample, tmp_path):
    store = tmp_path / "store"
    _, qid = corrected(tmp_path, sample, store, draw=True)
    release = resplit_with(sample, store, tmp_path / "next")
    assert verify_release(release) == []
    row = next(q for q in read_release(release).pool.to_pylist() if q["question_id"] == qid)
    assert row["answer"] == "2" and len(row["evidence_region_ids"]) == 2
    assert read_release(release).manifest["annotations"]["actions"] == {"add": 1, "edit_answer": 1}
