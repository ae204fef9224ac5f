"""End to end on the sample: every released hallucination question names its absence basis, unbased ones are set
aside in the pool, exported for review, and released after an imported Label Studio decision (basis ``review``)."""

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from reasonvqa.absence_bases import BASES
from reasonvqa.flows.cli import app
from reasonvqa.tasks.release.verify import verify_release
from tests.annotation_exports.helpers import annotate, verdict, write_json

pytestmark = pytest.mark.integration


@pytest.fixture
def sample(sample_release) -> Path:
    """The session's sample build (tests/conftest.py), read only."""
    return sample_release


def _split(release: Path, name: str) -> pl.DataFrame:
    return pl.read_parquet(release / name / "*.parquet")


def test_released_hallucination_questions_name_their_basis_and_the_card_counts_them(sample):
    assert verify_release(sample) == []
    released = pl.concat([_split(sample, "train"), _split(sample, "test")])
    halluc = released.filter(pl.col("is_hallucination"))
    assert halluc.height > 0  # the sample release still holds hallucination questions
    assert set(halluc["absence_basis"]) <= set(BASES) and halluc["absence_evidence"].null_count() == 0
    assert released.filter(~pl.col("is_hallucination").fill_null(False))["absence_basis"].null_count() == released.height - halluc.height
    breakdown = json.loads((sample / "stats" / "breakdown.json").read_text())
    assert breakdown["absence_basis"] == dict(sorted(halluc["absence_basis"].value_counts().iter_rows(),
                                                     key=lambda kv: BASES.index(kv[0])))
    assert "| absence basis | questions | share |" in (sample / "README.md").read_text()
    # nuScenes never annotates sidewalks or buildings: its frames claim absent only nuScenes' own classes
    pool = _split(sample, "pool")
    regions = _split(sample, "regions")
    nuscenes_classes = set(regions.filter(pl.col("image_id").str.starts_with("nuscenes:"))["label"])
    absent = pool.filter(pl.col("is_hallucination") & (pl.col("image_source") == "nuscenes")
                         & (pl.col("template_ids").list.first() == "hallucination:absent_object"))
    assert absent.height > 0 and set(absent["absence_basis"]) == {"taxonomy"}
    claimed = {json.loads(e)["taxonomy"] for e in absent["absence_evidence"]}
    assert claimed == {"nuscenes"}
    for answer in absent["answer"]:
        assert any(f" {c} " in answer or f" {c}s " in answer for c in nuscenes_classes), answer


def test_unbased_questions_are_set_aside_then_released_after_review(sample, tmp_path):
    pool = _split(sample, "pool")
    unbased = pool.filter(pl.col("is_hallucination") & pl.col("absence_basis").is_null())
    assert unbased.height > 0
    released = set(pl.concat([_split(sample, "train"), _split(sample, "test")])["question_id"])
    assert not set(unbased["question_id"]) & released
    removed = pl.read_parquet(sample / "stats" / "balance_removed.parquet")
    assert set(removed.filter(pl.col("reason") == "no_absence_basis")["question_id"]) == set(unbased["question_id"])

    runner = CliRunner()
    store, batch = tmp_path / "store", tmp_path / "batch"
    done = runner.invoke(app, ["export", "--format", "labelstudio", "--source", str(sample), "--size", "4",
                               "--absence-basis", "none", "--out", str(batch), "--store", str(store)])
    assert done.exit_code == 0, done.output
    tasks = json.loads((batch / "tasks.json").read_text())
    sent = [t["data"]["reasonvqa"]["item_id"] for t in tasks]
    assert len(sent) == 4 and set(sent) <= set(unbased["question_id"])
    # the reviewer confirms three absences and finds the fourth object in the picture
    records = [annotate(t, [verdict("correct" if k < 3 else "wrong")], task_id=k + 1) for k, t in enumerate(tasks)]
    done = runner.invoke(app, ["import", str(write_json(tmp_path / "ls.json", records)), "--format", "labelstudio",
                               "--store", str(store)])
    assert done.exit_code == 0, done.output

    done = runner.invoke(app, ["resplit", str(sample), "--out", str(tmp_path / "next"), "--decisions", str(store),
                               "--absence-basis", "review,taxonomy"])
    assert done.exit_code == 0, done.output
    nxt = Path(done.output.strip().splitlines()[-1])
    assert verify_release(nxt) == []
    new_pool = _split(nxt, "pool")
    reviewed = new_pool.filter(pl.col("question_id").is_in(sent))
    assert sorted(reviewed["absence_basis"].to_list()) == ["review"] * 3  # the wrong one is dropped
    evidence = [json.loads(e) for e in reviewed["absence_evidence"]]
    assert all(e["decision_id"].startswith("d-") and e["replaces"] is None for e in evidence)
    out = pl.concat([_split(nxt, "train"), _split(nxt, "test")]).filter(pl.col("is_hallucination"))
    assert set(sent[:3]) <= set(out["question_id"])  # released after the review
    assert set(out["absence_basis"]) <= {"review", "taxonomy"}
    report = json.loads((nxt / "stats" / "balance_report.json").read_text())
    assert report["removed_by_reason"]["no_absence_basis"] == unbased.height - 4
    assert report["removed_by_reason"]["absence_basis_not_allowed"] > 0  # wrong attributes, refuting boxes
    assert json.loads((nxt / "manifest.json").read_text())["config"]["balance"]["absence_bases"] == ["review", "taxonomy"]


def test_an_unknown_basis_exits_with_a_message(sample, tmp_path):
    done = CliRunner().invoke(app, ["resplit", str(sample), "--out", str(tmp_path), "--absence-basis", "hunch"])
    assert done.exit_code == 2 and "unknown basis ['hunch']" in done.output
