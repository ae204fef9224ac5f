"""Score a predictions file on one split of a release: each question kind by its paper's metric.

- ``template`` (ReasonVQA): multiple-choice and open-ended accuracy, per hop and per knowledge domain;
- ``grounded``, ``grounded_vlm`` (VistaQA): Grove with its text accuracy T (mean S_a) and mask score M (mean
  S_m), per task type, per visual domain, hallucination and not; S_a is the normalized exact match, or with a
  judge ``judge.judge_answers_detailed`` (a reply without a verdict scores 0 and is named in ``judge_errors``);
- ``verified`` (PROVE): hscore and tscore through ``prove.prove_scores``, which needs the judge's LLM; without
  it the kind is counted, not scored; questions it leaves out are named in ``not_scored``.

A question without a valid prediction is not scored: it is a ``missing_id`` problem of the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from reasonvqa.call_cache import CallCache
from reasonvqa.llm import LLMClient
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


@dataclass(frozen=True)
class Judge:
    """The LLM behind ``--judge`` and the call cache its requests go through (a rerun sends none)."""

    client: LLMClient
    cache: CallCache | None = None


def image_sizes(split: ReleaseSplit) -> dict[str, tuple[int, int] | None]:
    """question id -> (height, width) of its image (None where the release does not say)."""
    rows = split.rows.select("question_id", "height", "width").iter_rows()
    return {q: (int(h), int(w)) if h is not None and w is not None else None for q, h, w in rows}


def evaluate(release: Path, predictions_file: Path, split_name: str = "test", judge: Judge | None = None) -> dict:
    """The report of ``predictions_file`` on ``split_name`` of ``release`` (see the module docstring)."""
    split = read_release_split(release, split_name)
    predictions = read_predictions(predictions_file, image_sizes(split))
    return score_split(split, predictions, judge)


def score_split(split: ReleaseSplit, predictions: Predictions, judge: Judge | None = None) -> dict:
    """The report of checked predictions on a read split."""
    rows = split.rows.filter(pl.col("question_id").is_in(list(predictions.by_id)))
    kinds: dict[str, dict] = {}
    for kind in sorted(split.rows["kind"].fill_null("template").unique().to_list()):
        mine = rows.filter(pl.col("kind").fill_null("template") == kind)
        total = split.rows.filter(pl.col("kind").fill_null("template") == kind).height
        predicted = [predictions.by_id[q] for q in mine["question_id"].to_list()]
        entry = {"questions": total, "scored": mine.height}
        if kind in GROVE_KINDS:
            entry |= _grove(split, mine, predicted, judge)
        elif kind == "verified":
            entry |= _prove(split, mine, predicted, judge)
        else:
            entry |= _reasonvqa(mine, predicted)
        kinds[kind] = entry
    return {"release": str(split.release), "split": split.split, "predictions": str(predictions.path),
            "lines": predictions.lines, "questions": split.rows.height, "scored": rows.height,
            "judge": judge is not None, "problems": predictions.counts(), "kinds": kinds,
            "problem_lines": predictions.problem_rows()}


def _reasonvqa(rows: pl.DataFrame, predicted: list[Prediction]) -> dict:
    scores = score_multiple_choice(rows, predicted)
    return {"paper": "ReasonVQA", "metrics": {m: summarize(scores[m]) for m in MC_METRICS},
            "by_hop": by_group(scores, "n_hop", MC_METRICS), "by_domain": by_group(scores, "domains", MC_METRICS)}


def _answer_scores(rows: pl.DataFrame, predicted: list[Prediction], judge: Judge | None) -> tuple[np.ndarray, dict]:
    """S_a per row (the judge's verdicts with a judge, else normalized exact match) and question id -> why the
    judge gave no verdict."""
    answers = pl.Series([p.answer for p in predicted], dtype=pl.String)
    if judge is None:
        return exact_match(answers, rows["answer"]).to_numpy(), {}
    from reasonvqa.tasks.evaluate.judge import JudgeItem, judge_answers_detailed  # the LLM judge: only when asked

    columns = (rows[c].to_list() for c in ("question", "answer", "task_type", "visual_domain"))
    items = [JudgeItem(question=q or "", reference=r or "", prediction=p, task_type=t or "", domain=d or "")
             for q, r, t, d, p in zip(*columns, answers.to_list())]
    verdicts = judge_answers_detailed(judge.client, items, judge.cache)
    ids = rows["question_id"].to_list()
    return np.asarray(verdicts.scores, dtype=np.float64), {ids[i]: why for i, why in sorted(verdicts.errors.items())}


def _grove(split: ReleaseSplit, rows: pl.DataFrame, predicted: list[Prediction], judge: Judge | None) -> dict:
    answer_scores, judge_errors = _answer_scores(rows, predicted, judge)
    scores = score_grove(rows, answer_scores, [p.masks for p in predicted], split.regions)
    scorable = scores.filter(pl.col("grove").is_not_null())
    halluc = scorable.with_columns(pl.when(pl.col("is_hallucination")).then(pl.lit("hallucination"))
                                   .otherwise(pl.lit("non_hallucination")).alias("subset"))
    return {"paper": "VistaQA", "answer_score": "llm_judge" if judge is not None else "normalized_exact_match",
            "judge_errors": judge_errors,
            "unscorable_missing_regions": scores.height - scorable.height,
            "metrics": {m: summarize(scorable[m]) for m in GROVE_METRICS},
            "by_task_type": by_group(scorable, "task_type", GROVE_METRICS),
            "by_visual_domain": by_group(scorable, "visual_domain", GROVE_METRICS),
            "by_hallucination": by_group(halluc, "subset", GROVE_METRICS)}


def _prove(split: ReleaseSplit, rows: pl.DataFrame, predicted: list[Prediction], judge: Judge | None) -> dict:
    if judge is None:
        return {"paper": "PROVE", "note": NEEDS_JUDGE, "metrics": {}}
    from reasonvqa.tasks.evaluate.prove import prove_scores  # PROVE's scores: loaded only when asked

    answers = {q: p.answer for q, p in zip(rows["question_id"].to_list(), predicted)}
    result = prove_scores(split.release, rows.to_dicts(), answers, judge.client, cache=judge.cache)
    ids = rows["question_id"].to_list()
    hscore = np.array([result.scores[q][0] if q in result.scores else np.nan for q in ids])
    tscore = np.array([result.scores[q][1] if q in result.scores else np.nan for q in ids])
    sources = pl.Series(list(result.graph_source.values()), dtype=pl.String).value_counts(sort=True)
    return {"paper": "PROVE", "metrics": {"hscore": summarize(hscore), "tscore": summarize(tscore)},
            "not_scored": dict(sorted(result.errors.items())),
            "scene_graph_source": dict(zip(sources[:, 0].to_list(), sources["count"].to_list()))}
