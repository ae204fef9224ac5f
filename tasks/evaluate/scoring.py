"""Score a predictions file on one split of a release: each question kind by its paper's metric.

- ``template`` (ReasonVQA): multiple-choice and open-ended accuracy, per hop and per knowledge domain;
- ``grounded``, ``grounded_vlm`` (VistaQA): Grove with its text accuracy T (mean S_a) and mask score M (mean
  S_m), per task type, per visual domain, hallucination and not; S_a is the normalized exact match, or with a
  judge ``judge.judge_answers``;
- ``verified`` (PROVE): hscore and tscore through ``prove.score_prove``, which needs the judge's LLM; without
  it the kind is counted, not scored.

A question without a valid prediction is not scored: it is a ``missing_id`` problem of the report.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import polars as pl

from reasonvqa.tasks.evaluate.answers import exact_match
from reasonvqa.tasks.evaluate.grove import score_grove
from reasonvqa.tasks.evaluate.multiple_choice import score_multiple_choice
from reasonvqa.tasks.evaluate.predictions import Prediction, Predictions, read_predictions
from reasonvqa.tasks.evaluate.release_rows import ReleaseSplit, read_release_split
from reasonvqa.tasks.evaluate.summary import by_group, summarize

GROVE_KINDS = ("grounded", "grounded_vlm")
GROVE_METRICS = ["grove", "s_a", "s_m"]
MC_METRICS = ["multiple_choice", "open_ended"]
NEEDS_JUDGE = "hscore/tscore need --judge"


def image_sizes(split: ReleaseSplit) -> dict[str, tuple[int, int] | None]:
    """question id -> (height, width) of its image (None where the release does not say)."""
    rows = split.rows.select("question_id", "height", "width").iter_rows()
    return {q: (int(h), int(w)) if h is not None and w is not None else None for q, h, w in rows}


def evaluate(release: Path, predictions_file: Path, split_name: str = "test", judge_client=None) -> dict:
    """The report of ``predictions_file`` on ``split_name`` of ``release`` (see the module docstring)."""
    split = read_release_split(release, split_name)
    predictions = read_predictions(predictions_file, image_sizes(split))
    return score_split(split, predictions, judge_client)


def score_split(split: ReleaseSplit, predictions: Predictions, judge_client=None) -> dict:
    """The report of checked predictions on a read split."""
    rows = split.rows.filter(pl.col("question_id").is_in(list(predictions.by_id)))
    kinds: dict[str, dict] = {}
    for kind in sorted(split.rows["kind"].fill_null("template").unique().to_list()):
        mine = rows.filter(pl.col("kind").fill_null("template") == kind)
        total = split.rows.filter(pl.col("kind").fill_null("template") == kind).height
        predicted = [predictions.by_id[q] for q in mine["question_id"].to_list()]
        entry = {"questions": total, "scored": mine.height}
        if kind in GROVE_KINDS:
            entry |= _grove(split, mine, predicted, judge_client)
        elif kind == "verified":
            entry |= _prove(split, mine, predicted, judge_client)
        else:
            entry |= _reasonvqa(mine, predicted)
        kinds[kind] = entry
    return {"release": str(split.release), "split": split.split, "predictions": str(predictions.path),
            "lines": predictions.lines, "questions": split.rows.height, "scored": rows.height,
            "judge": judge_client is not None, "problems": predictions.counts(), "kinds": kinds,
            "problem_lines": predictions.problem_rows()}


def _reasonvqa(rows: pl.DataFrame, predicted: list[Prediction]) -> dict:
    scores = score_multiple_choice(rows, predicted)
    return {"paper": "ReasonVQA", "metrics": {m: summarize(scores[m]) for m in MC_METRICS},
            "by_hop": by_group(scores, "n_hop", MC_METRICS), "by_domain": by_group(scores, "domains", MC_METRICS)}


def _answer_scores(rows: pl.DataFrame, predicted: list[Prediction], judge_client) -> np.ndarray:
    """S_a per row: the judge's verdicts with a client, else normalized exact match."""
    answers = pl.Series([p.answer for p in predicted], dtype=pl.String)
    if judge_client is None:
        return exact_match(answers, rows["answer"]).to_numpy()
    judge = importlib.import_module("reasonvqa.tasks.evaluate.judge")  # the LLM judge: loaded only when asked

    items = [judge.JudgeItem(question=q or "", reference=r or "", prediction=p)
             for q, r, p in zip(rows["question"].to_list(), rows["answer"].to_list(), answers.to_list())]
    return np.asarray(judge.judge_answers(judge_client, items), dtype=np.float64)


def _grove(split: ReleaseSplit, rows: pl.DataFrame, predicted: list[Prediction], judge_client) -> dict:
    scores = score_grove(rows, _answer_scores(rows, predicted, judge_client), [p.masks for p in predicted],
                         split.regions)
    scorable = scores.filter(pl.col("grove").is_not_null())
    halluc = scorable.with_columns(pl.when(pl.col("is_hallucination")).then(pl.lit("hallucination"))
                                   .otherwise(pl.lit("non_hallucination")).alias("subset"))
    return {"paper": "VistaQA", "answer_score": "llm_judge" if judge_client is not None else "normalized_exact_match",
            "unscorable_missing_regions": scores.height - scorable.height,
            "metrics": {m: summarize(scorable[m]) for m in GROVE_METRICS},
            "by_task_type": by_group(scorable, "task_type", GROVE_METRICS),
            "by_visual_domain": by_group(scorable, "visual_domain", GROVE_METRICS),
            "by_hallucination": by_group(halluc, "subset", GROVE_METRICS)}


def _prove(split: ReleaseSplit, rows: pl.DataFrame, predicted: list[Prediction], judge_client) -> dict:
    if judge_client is None:
        return {"paper": "PROVE", "note": NEEDS_JUDGE, "metrics": {}}
    prove = importlib.import_module("reasonvqa.tasks.evaluate.prove")  # PROVE's scores: loaded only when asked

    answers = {q: p.answer for q, p in zip(rows["question_id"].to_list(), predicted)}
    scored = prove.score_prove(split.release, rows.to_dicts(), answers, judge_client)
    ids = rows["question_id"].to_list()
    hscore = np.array([scored[q][0] if q in scored else np.nan for q in ids])
    tscore = np.array([scored[q][1] if q in scored else np.nan for q in ids])
    return {"paper": "PROVE", "metrics": {"hscore": summarize(hscore), "tscore": summarize(tscore)}}
