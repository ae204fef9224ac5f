"""How much of a release a model answers without the image: the bias report (``stats/bias.json``).

Baselines scored on the test split, each next to chance (the mean of 1 / number of choices):

- choice-only, looking at one question's choices and nothing else:
  ``closest_to_mean`` and ``median`` (number and date questions, the choices read as numbers),
  ``most_frequent_choice`` (every question: the choice that occurs most often among the choices
  of the whole release, train and test);
- question-only: ``question_prior``, the most common train answer of the same question text
  (a text never seen in train is answered at chance).

Ties are credited in expectation (1/k when the answer is one of k tied picks), so no baseline
gains from an arbitrary tie-break. Targets (issue 11): each choice-only baseline within
``CHOICE_ONLY_MARGIN`` of chance, the question prior at most ``QUESTION_PRIOR_MAX``.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

CHOICE_ONLY_MARGIN = 0.10
QUESTION_PRIOR_MAX = 0.50
PAPER_AVG_QUESTION_WORDS = 9.77  # ReasonVQA supplementary Table 2 (full dataset; ReasonVQA-U: 9.62)
_NUMBER = r"^(-?[\d,]*\.?\d+)"
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


def choice_values(choices: pl.Expr, category: pl.Expr) -> pl.Expr:
    """Each choice as a float: numbers without separators and units, dates as fractional years (44 BC = -43)."""
    number = pl.element().str.extract(_NUMBER).str.replace_all(",", "").cast(pl.Float64, strict=False)
    year = pl.element().str.extract(r"(\d+)( BC)?$").cast(pl.Float64, strict=False)
    bc = pl.element().str.ends_with(" BC")
    month = pl.element().str.extract(r"(" + "|".join(_MONTHS) + r")").replace_strict(
        {m: float(i) for i, m in enumerate(_MONTHS)}, default=0.0, return_dtype=pl.Float64
    )
    day = pl.element().str.extract(r"^(\d+) (?:" + "|".join(_MONTHS) + ")").cast(pl.Float64, strict=False).fill_null(1.0)
    date = pl.when(bc).then(1 - year).otherwise(year) + month / 12 + (day - 1) / 372
    return pl.when(category == "date").then(choices.list.eval(date)).otherwise(choices.list.eval(number))


def _expected_hit(picked: pl.Expr, answer_index: pl.Expr) -> pl.Expr:
    """1/k when the answer's index is among the k picked indices, else 0."""
    return pl.when(picked.list.contains(answer_index)).then(1.0 / picked.list.len()).otherwise(0.0)


def _ties(scores: pl.Expr, best: str) -> pl.Expr:
    """Indices of the choices whose score equals the best (min or max) one."""
    target = pl.element().min() if best == "min" else pl.element().max()
    return scores.list.eval(pl.arg_where(pl.element() == target))


def bias_report(train: pa.Table, test: pa.Table) -> dict:
    """Accuracy on ``test`` of the choice-only and question-only baselines, chance, and the targets."""
    cols = ["question", "answer", "choices", "answer_category"]
    multiple_choice = pl.col("choices").is_not_null()  # free-form kinds (verified, grounded) have no choices
    tr = pl.from_arrow(train.select(cols)).filter(multiple_choice)
    te = pl.from_arrow(test.select(cols)).filter(multiple_choice).with_row_index("row")
    long = te.select("row", "answer", "choices").explode("choices").with_columns(k=pl.int_range(pl.len()).over("row"))
    index = long.filter(pl.col("choices") == pl.col("answer")).group_by("row").agg(answer_index=pl.col("k").min())
    te = te.join(index, on="row", how="left").with_columns(pl.col("answer_index").fill_null(-1)).sort("row")
    report: dict = {"test_questions": te.height, "chance": _mean(te.select(1.0 / pl.col("choices").list.len()))}
    if te.is_empty():
        return report | {"baselines": {}, "targets": _targets({}, report["chance"])}

    numeric = te.filter(pl.col("answer_category").is_in(["number", "date"]))
    values = numeric.with_columns(v=choice_values(pl.col("choices"), pl.col("answer_category")))
    values = values.filter(pl.col("v").list.eval(pl.element().is_null()).list.any().not_())
    mean_gap = pl.col("v").list.eval((pl.element() - pl.element().mean()).abs())
    median_gap = pl.col("v").list.eval((pl.element() - pl.element().median()).abs())
    baselines = {}
    if values.height:
        baselines["closest_to_mean"] = _mean(values.select(_expected_hit(_ties(mean_gap, "min"), pl.col("answer_index"))))
        baselines["median"] = _mean(values.select(_expected_hit(_ties(median_gap, "min"), pl.col("answer_index"))))
        baselines["numeric_questions"] = values.height
        baselines["numeric_chance"] = _mean(values.select(1.0 / pl.col("choices").list.len()))

    everything = pl.concat([tr.select("choices"), te.select("choices")]).explode("choices")
    counts = everything.group_by("choices").len("n")
    seen = long.join(counts, on="choices", how="left").join(te.select("row", "answer_index"), on="row")
    seen = seen.sort("row", "k").group_by("row", maintain_order=True).agg(pl.col("n"), pl.col("answer_index").first())
    baselines["most_frequent_choice"] = _mean(seen.select(_expected_hit(_ties(pl.col("n"), "max"), pl.col("answer_index"))))

    prior = tr.group_by("question", "answer").len("n")
    top = prior.filter(pl.col("n") == pl.col("n").max().over("question")).group_by("question").agg(
        top=pl.col("answer"), k=pl.len()
    )
    scored = te.join(top, on="question", how="left").select(
        pl.when(pl.col("top").is_null()).then(1.0 / pl.col("choices").list.len())
        .when(pl.col("top").list.contains(pl.col("answer"))).then(1.0 / pl.col("k"))
        .otherwise(0.0)
    )
    baselines["question_prior"] = _mean(scored)
    baselines["question_prior_coverage"] = _mean(te.join(top, on="question", how="left").select(pl.col("top").is_not_null()))
    report["baselines"] = baselines
    report["question_words"] = question_words(pl.concat([tr.select("question"), te.select("question")]))
    report["targets"] = _targets(baselines, report["chance"])
    return report


def question_words(questions: pl.DataFrame) -> dict:
    """Question length in words (mean, quartiles, histogram) next to the paper's mean."""
    words = questions.select(pl.col("question").str.split(" ").list.len().alias("w"))["w"]
    if words.is_empty():
        return {"paper_mean": PAPER_AVG_QUESTION_WORDS}
    hist = words.value_counts().sort("w")
    return {
        "mean": round(float(words.mean()), 2),
        "quartiles": [float(words.quantile(q, "nearest")) for q in (0.25, 0.5, 0.75)],
        "histogram": {str(w): int(n) for w, n in zip(hist["w"].to_list(), hist["count"].to_list())},
        "paper_mean": PAPER_AVG_QUESTION_WORDS,
    }


def _targets(baselines: dict, chance: float | None) -> dict:
    out = {"choice_only_margin": CHOICE_ONLY_MARGIN, "question_prior_max": QUESTION_PRIOR_MAX}
    if chance is None:
        return out | {"met": True}
    checks = {}
    for name in ("closest_to_mean", "median", "most_frequent_choice"):
        if name in baselines:
            reference = baselines.get("numeric_chance", chance) if name != "most_frequent_choice" else chance
            checks[name] = abs(baselines[name] - reference) <= CHOICE_ONLY_MARGIN
    if "question_prior" in baselines:
        checks["question_prior"] = baselines["question_prior"] <= QUESTION_PRIOR_MAX
    return out | {"checks": checks, "met": all(checks.values())}


def _mean(frame: pl.DataFrame) -> float | None:
    if frame.is_empty():
        return None
    return round(float(frame.to_series().cast(pl.Float64).mean()), 4)
