"""How much of a release a model answers without the image: the bias report (``stats/bias.json``).

Baselines, each next to chance (the mean of 1 / number of choices):

- choice-only, looking at one question's choices and nothing else, so no training data is involved
  and every released multiple-choice question (train and test) is scored:
  ``closest_to_mean`` and ``median`` (number and date questions, the choices read as numbers),
  ``most_frequent_choice`` (every question: the choice that occurs most often among the choices
  of the whole release, train and test);
- question-only: ``question_prior``, the most common train answer of the same question text,
  scored on test (a text never seen in train is answered at chance).

Ties are credited in expectation (1/k when the answer is one of k tied picks), so no baseline
gains from an arbitrary tie-break. Each accuracy comes with its number of questions and a 95 %
Wilson interval (``intervals``). Targets (issue 11): each choice-only baseline within
``CHOICE_ONLY_MARGIN`` of chance, the question prior at most ``QUESTION_PRIOR_MAX``. A target is
judged (``met`` / ``not_met``) only on at least ``MIN_JUDGED_N`` questions, else it is
``insufficient_n``: at n = 100 a baseline at chance (25 %) leaves the 10-point band by sampling
noise alone about 2 % of the time, at n = 1 half the time or more.
"""

from __future__ import annotations

import math

import polars as pl
import pyarrow as pa

CHOICE_ONLY_MARGIN = 0.10
QUESTION_PRIOR_MAX = 0.50
MIN_JUDGED_N = 100  # questions a target is judged on (see the module docstring)
_Z95 = 1.959963984540054  # two-sided 95 % normal quantile
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
    """Accuracy of the choice-only baselines (train and test) and of the question-only prior (test),
    chance, the number of questions each is measured on with a 95 % interval, and the targets."""
    cols = ["question", "answer", "choices", "answer_category"]
    multiple_choice = pl.col("choices").is_not_null()  # free-form kinds (verified, grounded) have no choices
    tr = pl.from_arrow(train.select(cols)).filter(multiple_choice)
    te = pl.from_arrow(test.select(cols)).filter(multiple_choice)
    released = _with_answer_index(pl.concat([tr, te]).with_row_index("row"))
    report: dict = {"test_questions": te.height, "questions": released.height,
                    "chance": _mean(released.select(1.0 / pl.col("choices").list.len()))}
    if released.is_empty():
        return report | {"baselines": {}, "intervals": {}, "targets": _targets({}, {}, report["chance"])}

    hits: dict[str, pl.DataFrame] = {}  # baseline -> one credit per scored question
    numeric = released.filter(pl.col("answer_category").is_in(["number", "date"]))
    values = numeric.with_columns(v=choice_values(pl.col("choices"), pl.col("answer_category")))
    values = values.filter(pl.col("v").list.eval(pl.element().is_null()).list.any().not_())
    mean_gap = pl.col("v").list.eval((pl.element() - pl.element().mean()).abs())
    median_gap = pl.col("v").list.eval((pl.element() - pl.element().median()).abs())
    baselines = {}
    if values.height:
        hits["closest_to_mean"] = values.select(_expected_hit(_ties(mean_gap, "min"), pl.col("answer_index")))
        hits["median"] = values.select(_expected_hit(_ties(median_gap, "min"), pl.col("answer_index")))
        baselines["numeric_questions"] = values.height
        baselines["numeric_chance"] = _mean(values.select(1.0 / pl.col("choices").list.len()))

    long = released.select("row", "choices").explode("choices").with_columns(k=pl.int_range(pl.len()).over("row"))
    counts = long.group_by("choices").len("n")
    seen = long.join(counts, on="choices", how="left").join(released.select("row", "answer_index"), on="row")
    seen = seen.sort("row", "k").group_by("row", maintain_order=True).agg(pl.col("n"), pl.col("answer_index").first())
    hits["most_frequent_choice"] = seen.select(_expected_hit(_ties(pl.col("n"), "max"), pl.col("answer_index")))

    prior = tr.group_by("question", "answer").len("n")
    top = prior.filter(pl.col("n") == pl.col("n").max().over("question")).group_by("question").agg(
        top=pl.col("answer"), k=pl.len()
    )
    if te.height:
        hits["question_prior"] = te.join(top, on="question", how="left", maintain_order="left").select(
            pl.when(pl.col("top").is_null()).then(1.0 / pl.col("choices").list.len())
            .when(pl.col("top").list.contains(pl.col("answer"))).then(1.0 / pl.col("k"))
            .otherwise(0.0)
        )
        baselines["question_prior_coverage"] = _mean(te.join(top, on="question", how="left").select(pl.col("top").is_not_null()))
    baselines |= {name: _mean(frame) for name, frame in hits.items()}
    report["baselines"] = dict(sorted(baselines.items()))
    report["intervals"] = {name: _interval(frame, "test" if name == "question_prior" else "train+test")
                           for name, frame in sorted(hits.items())}
    report["question_words"] = question_words(released.select("question"))
    report["targets"] = _targets(baselines, report["intervals"], report["chance"])
    return report


def _with_answer_index(questions: pl.DataFrame) -> pl.DataFrame:
    """``answer_index``: the position of the answer among the choices (-1 when absent)."""
    long = questions.select("row", "answer", "choices").explode("choices").with_columns(k=pl.int_range(pl.len()).over("row"))
    index = long.filter(pl.col("choices") == pl.col("answer")).group_by("row").agg(answer_index=pl.col("k").min())
    return questions.join(index, on="row", how="left").with_columns(pl.col("answer_index").fill_null(-1)).sort("row")


def wilson_interval(accuracy: float, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion measured on ``n`` questions (n > 0)."""
    denominator = 1 + z * z / n
    centre = (accuracy + z * z / (2 * n)) / denominator
    half = z * math.sqrt(accuracy * (1 - accuracy) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _interval(credits: pl.DataFrame, scored_on: str) -> dict:
    n = credits.height
    accuracy = float(credits.to_series().cast(pl.Float64).mean()) if n else 0.0
    low, high = wilson_interval(accuracy, n) if n else (0.0, 1.0)
    return {"n": n, "ci95": [round(low, 4), round(high, 4)], "scored_on": scored_on}


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


def _targets(baselines: dict, intervals: dict, chance: float | None) -> dict:
    """Per target ``met`` / ``not_met`` (judged on at least ``MIN_JUDGED_N`` questions) or
    ``insufficient_n``; ``met`` overall: True when every target is met, False when one is not,
    None when none fails but some could not be judged."""
    out = {"choice_only_margin": CHOICE_ONLY_MARGIN, "question_prior_max": QUESTION_PRIOR_MAX, "min_n": MIN_JUDGED_N}
    if chance is None:
        return out | {"checks": {}, "met": None}
    checks = {}
    for name in ("closest_to_mean", "median", "most_frequent_choice", "question_prior"):
        if name not in baselines:
            continue
        if name == "question_prior":
            ok = baselines[name] <= QUESTION_PRIOR_MAX
        else:
            reference = baselines.get("numeric_chance", chance) if name != "most_frequent_choice" else chance
            ok = abs(baselines[name] - reference) <= CHOICE_ONLY_MARGIN
        judged = intervals[name]["n"] >= MIN_JUDGED_N
        checks[name] = ("met" if ok else "not_met") if judged else "insufficient_n"
    met = False if "not_met" in checks.values() else (None if "insufficient_n" in checks.values() else True)
    return out | {"checks": checks, "met": met}


def _mean(frame: pl.DataFrame) -> float | None:
    if frame.is_empty():
        return None
    return round(float(frame.to_series().cast(pl.Float64).mean()), 4)
