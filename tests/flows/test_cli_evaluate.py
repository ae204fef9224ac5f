"""`reasonvqa evaluate` on the shared sample release: each blind baseline prints the table, an oracle scores 100,
bad input is one line naming the file, --card writes the baselines' figures, a judge (a replaying server on
127.0.0.1) scores the answers."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from reasonvqa.flows.cli import app

from tests.tasks.verify.llm_server import FixtureLLM

runner = CliRunner()


@pytest.fixture(scope="module")
def split_rows(sample_release) -> pl.DataFrame:
    return pl.read_parquet(sample_release / "test" / "*.parquet")


@pytest.mark.parametrize("baseline", ["text-only", "choices-only", "prior"])
def test_each_blind_baseline_prints_the_table(sample_release, split_rows, tmp_path, baseline):
    result = runner.invoke(app, ["evaluate", str(sample_release), "--baseline", baseline, "--predictions-out",
                                 str(tmp_path), "--out", str(tmp_path / "report.json")])
    assert result.exit_code == 0, result.output
    for text in ("Grove", "T (mean S_a)", "M (mean S_m)", "MC accuracy", "task attribute", "hallucination",
                 "hop 2", f"{split_rows.height}/{split_rows.height} scored", "predictions: no problems"):
        assert text in result.output
    predictions = (tmp_path / f"{sample_release.parent.name}-{sample_release.name}-{baseline}-test.jsonl").read_text()
    assert len(predictions.splitlines()) == split_rows.height
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["scored"] == report["questions"] == split_rows.height
    assert not any(report["problems"].values())
    grounded = split_rows.filter(pl.col("kind") == "grounded")
    entry = report["kinds"]["grounded"]
    assert entry["scored"] == grounded.height
    # a blind model predicts no masks: S_m is 1 on each hallucination question and 0 on the others
    assert entry["metrics"]["s_m"]["value"] == round(grounded["is_hallucination"].mean(), 4)
    assert entry["by_hallucination"]["hallucination"]["s_m"]["value"] == 1.0
    if baseline == "choices-only":  # grounded questions have no choices: nothing is answered
        assert entry["metrics"]["s_a"]["value"] == 0.0


def test_an_oracle_scores_one_and_problems_are_named(sample_release, split_rows, tmp_path):
    regions = pl.read_parquet(sample_release / "regions" / "*.parquet")
    evidence = {r["region_id"]: r["mask"] or [r["x"], r["y"], r["w"], r["h"]] for r in regions.iter_rows(named=True)}
    lines = [json.dumps({"question_id": q, "answer": a, "masks": [evidence[r] for r in ids or []]})
             for q, a, ids in split_rows.select("question_id", "answer", "evidence_region_ids").iter_rows()]
    path = tmp_path / "oracle.jsonl"
    path.write_text("\n".join(lines[1:] + [lines[2], "{", json.dumps({"question_id": "nope", "answer": ""})]) + "\n")
    result = runner.invoke(app, ["evaluate", str(sample_release), str(path), "--out", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["kinds"]["grounded"]["metrics"]["grove"]["value"] == 1.0
    assert report["kinds"]["template"]["metrics"]["multiple_choice"]["value"] == 1.0
    assert report["problems"] | {} == {**{k: 0 for k in report["problems"]}, "duplicate_id": 1, "bad_json": 1,
                                       "unknown_id": 1, "missing_id": 1}
    missing = [p for p in report["problem_lines"] if p["kind"] == "missing_id"]
    assert missing[0]["question_id"] == split_rows["question_id"][0]
    assert f"{path}:{len(lines)}" in [p["where"] for p in report["problem_lines"] if p["kind"] == "duplicate_id"]
    assert "1 duplicate_id" in result.output and "1 missing_id" in result.output


def test_unreadable_inputs_are_one_line_naming_the_file(sample_release, tmp_path):
    missing = tmp_path / "absent.jsonl"
    result = runner.invoke(app, ["evaluate", str(sample_release), str(missing)])
    assert result.exit_code != 0
    assert result.output.strip().count("\n") == 0 and str(missing) in result.output
    result = runner.invoke(app, ["evaluate", str(tmp_path), "--baseline", "prior"])
    assert result.exit_code != 0 and str(tmp_path / "manifest.json") in result.output


def test_card_writes_the_baselines_figures(sample_release, tmp_path):
    result = runner.invoke(app, ["evaluate", str(sample_release), "--baseline", "all", "--predictions-out",
                                 str(tmp_path / "p"), "--card", str(tmp_path / "card")])
    assert result.exit_code == 0, result.output
    section = (tmp_path / "card" / "evaluation.md").read_text()
    figures = json.loads((tmp_path / "card" / "evaluation.json").read_text())
    assert sorted(figures["reports"]) == ["choices-only", "prior", "text-only"]
    for row in figures["headline"]:
        assert f"| {row['baseline']} | {row['kind']} ({row['paper']}) |" in section
    assert section.startswith("## Blind baselines")


def test_a_judge_scores_the_answers_names_its_broken_verdicts_and_a_rerun_sends_no_request(sample_release, split_rows,
                                                                                           tmp_path):
    grounded = split_rows.filter(pl.col("kind") == "grounded").sort("question_id")
    broken = grounded["question_id"][0]
    lines = [json.dumps({"question_id": q, "answer": "zzz-broken" if q == broken else a})
             for q, a in grounded.select("question_id", "answer").iter_rows()]
    path = tmp_path / "grounded.jsonl"
    path.write_text("\n".join(lines) + "\n")
    replies = {"Predicted answer: zzz-broken": "no idea", "Predicted answer:": '{"correct": 1, "reason": "same"}'}
    args = ["evaluate", str(sample_release), str(path), "--predictions-out", str(tmp_path / "calls"),
            "--out", str(tmp_path / "r.json")]
    with FixtureLLM(generations=replies) as server:
        result = runner.invoke(app, [*args, "--judge", server.base_url, "--judge-model", "fixture"])
        assert result.exit_code == 0, result.output
        sent = len(server.requests)
        again = runner.invoke(app, [*args, "--judge", server.base_url, "--judge-model", "fixture"])
        assert again.exit_code == 0, again.output
        # one request per distinct conversation (questions asked of several images share one); the rerun is
        # served by the call cache
        assert 0.9 * grounded.height < sent <= grounded.height and len(server.requests) == sent
    entry = json.loads((tmp_path / "r.json").read_text())["kinds"]["grounded"]
    assert entry["answer_score"] == "llm_judge"
    assert entry["metrics"]["s_a"]["value"] == round((grounded.height - 1) / grounded.height, 4)
    assert list(entry["judge_errors"]) == [broken]
    assert entry["judge_errors"][broken] == "judge_no_verdict: 'no idea'"
