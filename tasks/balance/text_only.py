"""Text-only baselines per question kind (``bias.json`` ``text_only``): what a reader of the question alone gets.

A dataset whose questions need the image must not be answerable from the wording. Three readers, each
with its number of questions and its chance, per kind and (kind ``all``, when a release has several kinds) over
every released question together:

- ``hallucination_from_wording``: every word outside ``CLOSED_CLASS`` (function words and the generic
  nouns of the templates) is masked, and a question is called a hallucination question when most
  questions of the same masked text are (a vote); 5 folds by image (an image's questions are voted on by
  the other folds' questions only). Chance: the majority rate (always guess the larger class). Target
  (issue 30): at most chance + 5 points.
- ``answer_first_in_a_or_b``: questions "... A or B ...?" whose answer is one of the two options (its
  words occur on one side of the " or " only): the share answered by the first option. Chance 0.5,
  target 35-65 %.
- ``masked_question_prior``: a question is answered by the most common answer of the same masked question
  among the other folds' questions (5 folds by image, train+test, as above; a masked text the other folds
  lack: their most common answer of the kind). Chance: the kind's most common answer of the other folds
  alone, on the same questions. Reported, not judged.

Ties are credited 1/k and every accuracy is the exact mean of its credits (``exact_mean``), so the report
does not depend on how the released rows come in parts or their order. Hashes (masked texts, answers,
image folds) are polars' seeded hashes: a pure function of the text for a given polars version.
"""

from __future__ import annotations

from fractions import Fraction
from typing import cast

import polars as pl
import pyarrow as pa

from reasonvqa.masked_questions import CLOSED_CLASS, masked

FOLDS = 5
HALLUCINATION_MARGIN = 0.05  # issue 30: a text-only classifier no better than the majority rate + 5 points
FIRST_OPTION_BAND = (0.35, 0.65)  # issue 30: the answer is the first option of "A or B" in 35-65 % of them
ALL_KINDS = "all"  # the entry of every released question together (beside the per-kind ones, when there are several)
TEXT_COLUMNS = ["question", "answer", "kind", "is_hallucination", "image_id"]
_ROW = {"kind": pl.String, "masked": pl.UInt64, "halluc": pl.Boolean, "fold": pl.UInt8, "answer": pl.UInt64, "first": pl.Int8}


def first_option(questions: pl.Series, answers: pl.Series) -> pl.Series:
    """Per question: 1 when the answer is the option before its first " or ", 0 when the one after, null when it
    has no " or " or the answer's words are on both sides or neither (not an "A or B" answer)."""
    norm = lambda s: (" " + s.str.to_lowercase().str.replace_all(r"[^a-z0-9]+", " ").str.strip_chars() + " ")  # noqa: E731
    frame = pl.DataFrame({"q": norm(questions), "a": norm(answers)})
    at = pl.col("q").str.find(" or ", literal=True)
    left, right = pl.col("q").str.slice(0, at + 1), pl.col("q").str.slice(at + 3)
    in_left = left.str.contains(pl.col("a"), literal=True)
    in_right = right.str.contains(pl.col("a"), literal=True)
    usable = at.is_not_null() & (pl.col("a").str.len_chars() > 2)
    return frame.select(pl.when(usable & in_left & ~in_right).then(1).when(usable & in_right & ~in_left).then(0)
                        .otherwise(None).cast(pl.Int8).alias("first")).to_series()


class TextOnly:
    """The compact per-row facts of every released part (kind, hashed masked question, hallucination flag, image
    fold, hashed answer, A-or-B side), and the per-kind report once every part is in."""

    def __init__(self) -> None:
        self.parts: list[pl.DataFrame] = []

    def add(self, train: pa.Table, test: pa.Table) -> None:
        for table in (train, test):
            if table.num_rows and "question" in table.column_names and "answer" in table.column_names:
                self.parts.append(_rows(cast(pl.DataFrame, pl.from_arrow(table.select([c for c in TEXT_COLUMNS if c in table.column_names])))))

    def report(self) -> dict:
        rows = pl.concat(self.parts) if self.parts else pl.DataFrame(schema=_ROW)
        self.parts = []
        kinds = sorted(rows["kind"].unique().to_list())
        out = {kind: _baselines(rows.filter(pl.col("kind") == kind)) for kind in kinds}
        if len(kinds) > 1:  # the release as a whole: every question, whatever its kind
            out[ALL_KINDS] = _baselines(rows)
        return {"kinds": out, "closed_class_words": sorted(CLOSED_CLASS), "folds": FOLDS}


def _baselines(rows: pl.DataFrame) -> dict:
    """The three readers over ``rows`` (one kind's or the release's), those that apply."""
    entry = {"questions": rows.height, "hallucination_from_wording": hallucination_from_wording(rows),
             "answer_first_in_a_or_b": answer_first(rows), "masked_question_prior": masked_prior(rows)}
    return {k: v for k, v in entry.items() if v is not None}


def _rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The compact facts of one part's rows (masked texts computed once per distinct question)."""
    distinct = frame.select(pl.col("question").unique())
    distinct = distinct.with_columns(masked=masked(distinct["question"]).hash(seed=0))
    frame = frame.join(distinct, on="question", how="left", nulls_equal=True)
    n = frame.height
    column = lambda name, dtype: frame[name] if name in frame.columns else pl.Series(name, [None] * n, dtype)  # noqa: E731
    return pl.DataFrame({
        "kind": column("kind", pl.String).fill_null("template"),  # a 1.x row has no kind: a templated question
        "masked": frame["masked"],
        "halluc": column("is_hallucination", pl.Boolean),
        "fold": (column("image_id", pl.String).hash(seed=1) % FOLDS).cast(pl.UInt8),
        "answer": frame["answer"].hash(seed=0),
        "first": first_option(frame["question"].fill_null(""), frame["answer"].fill_null("")),
    }, schema=_ROW)


def exact_mean(credits: pl.Series) -> float | None:
    """The exact mean of credits (0, 1, 1/k) rounded once: independent of their order."""
    counted = credits.drop_nulls().value_counts()
    total = int(counted["count"].sum()) if counted.height else 0
    if not total:
        return None
    exact = sum((Fraction(v) * c for v, c in counted.iter_rows()), Fraction(0)) / total
    return round(float(exact), 4)


def _check(value: float | None, n: int, ok: bool) -> str:
    from reasonvqa.tasks.balance.bias import MIN_JUDGED_N

    return "insufficient_n" if n < MIN_JUDGED_N or value is None else ("met" if ok else "not_met")


def hallucination_from_wording(rows: pl.DataFrame) -> dict | None:
    """The masked-question vote for ``is_hallucination``, 5 folds by image; None when the kind has one class only."""
    rows = rows.filter(pl.col("halluc").is_not_null())
    if rows.height == 0 or rows["halluc"].n_unique() < 2:
        return None
    h = pl.col("halluc").cast(pl.Int64)
    total = rows.group_by("masked").agg(th=h.sum(), tn=pl.len())
    in_fold = rows.group_by("masked", "fold").agg(fh=h.sum(), fn=pl.len())
    fold_rate = rows.group_by("fold").agg(oh=h.sum(), on=pl.len())
    all_h, all_n = int(rows["halluc"].sum()), rows.height
    votes_h = pl.col("th") - pl.col("fh")  # the other folds' questions of the same masked text
    votes_r = (pl.col("tn") - pl.col("fn")) - votes_h
    other_h = all_h - pl.col("oh")  # the other folds' classes decide a tie (and an unseen masked text)
    other_r = (all_n - pl.col("on")) - other_h
    guess = pl.when(votes_h > votes_r).then(True).when(votes_h < votes_r).then(False).otherwise(other_h > other_r)
    scored = rows.join(total, on="masked").join(in_fold, on=["masked", "fold"]).join(fold_rate, on="fold")
    credit = scored.select((guess == pl.col("halluc")).cast(pl.Float64)).to_series()
    accuracy = exact_mean(credit)
    chance = round(max(all_h, all_n - all_h) / all_n, 4)
    return {"accuracy": accuracy, "n": all_n, "chance": chance, "chance_is": "majority rate",
            "hallucination_share": round(all_h / all_n, 4), "scored_on": "train+test, folds by image",
            "target_max": round(chance + HALLUCINATION_MARGIN, 4),
            "check": _check(accuracy, all_n, accuracy is not None and accuracy <= chance + HALLUCINATION_MARGIN)}


def answer_first(rows: pl.DataFrame) -> dict | None:
    """Share of "A or B" questions answered by the first option; None when the kind has none."""
    sides = rows["first"].drop_nulls()
    if not len(sides):
        return None
    share = exact_mean(sides.cast(pl.Float64))
    assert share is not None  # sides is not empty
    low, high = FIRST_OPTION_BAND
    return {"share_first": share, "n": len(sides), "chance": 0.5, "band": list(FIRST_OPTION_BAND),
            "scored_on": "train+test", "check": _check(share, len(sides), low <= share <= high)}


def masked_prior(rows: pl.DataFrame) -> dict | None:
    """The most common answer of each masked question among the other folds' questions, 5 folds by image, on
    train+test; None when the kind's questions lie in one fold only (no other folds to learn from)."""
    parts = [_prior_credits(rows.filter(pl.col("fold") != f), rows.filter(pl.col("fold") == f))
             for f in range(FOLDS)]
    scored = pl.concat(parts)
    if not scored.height:
        return None
    return {"accuracy": exact_mean(scored["credit"]), "n": scored.height, "chance": exact_mean(scored["chance"]),
            "chance_is": "the kind's most common answer of the other folds", "coverage": exact_mean(scored["seen"]),
            "scored_on": "train+test, folds by image"}


def _prior_credits(learn: pl.DataFrame, scored: pl.DataFrame) -> pl.DataFrame:
    """Per scored row: the credit of the learned rows' most common answer of its masked text (a masked text they do
    not hold: their most common answer), the credit of their most common answer alone, and whether the text was
    seen; ties credited 1/k. Empty when either side is."""
    if not learn.height or not scored.height:
        return pl.DataFrame(schema={"credit": pl.Float64, "chance": pl.Float64, "seen": pl.Float64})
    pairs = learn.group_by("masked", "answer").agg(c=pl.len())
    top = pairs.filter(pl.col("c") == pl.col("c").max().over("masked"))
    ties = top.group_by("masked").agg(k=pl.len())
    overall = learn.group_by("answer").agg(c=pl.len())
    overall_top = overall.filter(pl.col("c") == pl.col("c").max())
    k_all = overall_top.height
    seen = scored.join(ties, on="masked", how="left")
    hit = seen.join(top.select("masked", "answer", hit=pl.lit(True)), on=["masked", "answer"], how="left")
    base = hit.join(overall_top.select("answer", base=pl.lit(True)), on="answer", how="left")
    chance = pl.when(pl.col("base")).then(1.0 / k_all).otherwise(0.0)
    return base.select(
        credit=pl.when(pl.col("k").is_null()).then(chance).otherwise(pl.when(pl.col("hit")).then(1.0 / pl.col("k"))
                                                                     .otherwise(0.0)),
        chance=chance, seen=pl.col("k").is_not_null().cast(pl.Float64))
