"""The bias report: baselines that never look at the image, on literal fixtures and on a larger
synthetic build (the benchmark's synthetic knowledge and images through the real generator,
balancing and split)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from reasonvqa.tasks.balance.bias import bias_report, choice_values, wilson_interval
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.pipeline import balance_and_split


BIAS_SCHEMA = pa.schema([("question", pa.string()), ("answer", pa.string()), ("choices", pa.list_(pa.string())),
                         ("answer_category", pa.string())])


def _table(rows):
    return pa.table({k: [r[k] for r in rows] for k in BIAS_SCHEMA.names}, schema=BIAS_SCHEMA)


def test_baselines_on_a_literal_release():
    rows = [
        dict(question="q1", answer="10 m", choices=["8 m", "10 m", "12 m", "20 m"], answer_category="number"),
        dict(question="q1", answer="A", choices=["A", "B", "C", "D"], answer_category="literal"),
        dict(question="q2", answer="1889", choices=["1880", "1889", "1890", "44 BC"], answer_category="date"),
    ]
    report = bias_report(_table(rows), _table(rows))
    b = report["baselines"]
    # choice-only baselines score train and test (6 questions), the prior test only (3)
    assert report["chance"] == 0.25 and report["test_questions"] == 3 and report["questions"] == 6
    # 8,10,12,20: mean 12.5 -> 12 (wrong); dates: mean ~1404 -> 1880 (wrong)
    assert b["closest_to_mean"] == 0.0 and b["numeric_questions"] == 4
    # medians 11 and 1884.5 sit between two choices: each tie credits 1/2
    assert b["median"] == 0.5
    # q1's train answers tie ("10 m", "A"): 1/2 each; q2's only answer: 1
    assert b["question_prior"] == round(2 / 3, 4) and b["question_prior_coverage"] == 1.0
    assert report["intervals"]["question_prior"]["n"] == 3 and report["intervals"]["median"]["n"] == 4
    assert report["intervals"]["most_frequent_choice"]["scored_on"] == "train+test"
    # a handful of questions judges nothing, whatever the accuracies
    assert set(report["targets"]["checks"].values()) == {"insufficient_n"} and report["targets"]["met"] is None
    assert report["question_words"]["paper_mean"] == 9.77


def test_targets_are_judged_on_enough_questions_only():
    # 120 number questions whose answer is always the middle of evenly spaced choices: the mean rule is always right
    numbers = [dict(question=f"q{i}", answer=str(i + 2), choices=[str(i), str(i + 1), str(i + 2), str(i + 4)],
                    answer_category="number") for i in range(120)]
    report = bias_report(_table(numbers[:60]), _table(numbers[60:]))
    assert report["baselines"]["closest_to_mean"] == 1.0 and report["intervals"]["closest_to_mean"]["n"] == 120
    checks = report["targets"]["checks"]
    assert checks["closest_to_mean"] == "not_met" and checks["most_frequent_choice"] == "met"
    # test texts never seen in train: the prior is at chance, but 60 questions are too few to judge it
    assert report["baselines"]["question_prior"] == 0.25 and checks["question_prior"] == "insufficient_n"
    assert report["targets"]["met"] is False and report["targets"]["min_n"] == 100


def test_wilson_interval_matches_the_closed_form():
    low, high = wilson_interval(0.25, 100)
    assert low == pytest.approx(0.1754, abs=1e-4) and high == pytest.approx(0.3430, abs=1e-4)
    assert wilson_interval(1.0, 1) == (pytest.approx(0.2065, abs=1e-4), 1.0)


def test_choice_values_read_numbers_and_dates():
    import polars as pl

    frame = pl.DataFrame({"c": [["1,234.5 m", "-3 kg", "12%"], ["31 March 1889", "March 1889", "44 BC"]], "k": ["number", "date"]})
    got = frame.select(v=choice_values(pl.col("c"), pl.col("k")))["v"].to_list()
    assert got[0] == [1234.5, -3.0, 12.0]
    assert got[1][0] == pytest.approx(1889 + 2 / 12 + 30 / 372) and got[1][1] == pytest.approx(1889 + 2 / 12)
    assert got[1][2] == -43.0


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from reasonvqa.synthetic_build import load_synthetic, make_synthetic

    folder = tmp_path_factory.mktemp("synthetic")
    make_synthetic(folder, scale=0.006)  # 2,700 landmark photos, 900 scenes
    return load_synthetic(folder)


def _release_bias(tables, distractors: str) -> dict:
    from reasonvqa.tasks.questions.bank import load_bank
    from reasonvqa.tasks.questions.config import QuestionConfig
    from reasonvqa.tasks.questions.templated import generate_questions

    result = generate_questions(tables["images"], tables["objects"], tables["relations"], tables["links"], tables["facts"],
                                load_bank(), QuestionConfig(distractors=distractors), seed=0, shard=0,
                                knowledge_snapshot="synthetic")
    done = balance_and_split(result.outputs["questions"], BalanceConfig(), SplitConfig(), seed=0)
    return bias_report(done.split.train, done.split.test)


def test_default_config_meets_the_bias_targets_on_a_larger_pool(synthetic):
    report = _release_bias(synthetic, "exchangeable")
    assert report["test_questions"] >= 300 and report["baselines"]["numeric_questions"] >= 100
    assert report["targets"]["met"] is True, report["baselines"]
    assert set(report["targets"]["checks"].values()) == {"met"}
    b, chance = report["baselines"], report["chance"]
    for name in ("closest_to_mean", "median"):
        assert abs(b[name] - b["numeric_chance"]) <= 0.10, (name, b)
    assert abs(b["most_frequent_choice"] - chance) <= 0.10 and b["question_prior"] <= 0.50, b
    for name, span in report["intervals"].items():
        low, high = span["ci95"]
        assert span["n"] >= 100 and low <= b[name] <= high and high - low < 0.2, (name, span)
    # the paper's window method is what the mean rule exploits: the same pool fails the target
    paper = _release_bias(synthetic, "paper")
    assert paper["baselines"]["closest_to_mean"] > 0.45 and paper["targets"]["checks"]["closest_to_mean"] == "not_met"
    assert paper["targets"]["met"] is False


def test_most_frequent_choice_credits_ties_and_skips_null_choices():
    train = _table([dict(question="q1", answer="A", choices=["A", "B"], answer_category="literal"),
                    dict(question="q2", answer="B", choices=["B", "C"], answer_category="literal")])
    test = _table([dict(question="q3", answer="C", choices=["C", None], answer_category="literal")])
    # counts A 1, B 2, C 2: q1 picks B (wrong), q2 ties B and C (1/2), q3 picks C (its null choice is never picked)
    report = bias_report(train, test)
    assert report["baselines"]["most_frequent_choice"] == 0.5 and report["intervals"]["most_frequent_choice"]["n"] == 3


def test_report_over_parts_with_bucketed_questions_is_the_whole_report(tmp_path):
    from reasonvqa.tasks.balance.bias import bias_report_parts
    from tests.tasks.balance.synthetic import synthetic_pool

    pool = synthetic_pool(3_000, 300, 12, seed=5)
    questions = [f"What is the {p}?" if i % 2 else q for i, (p, q) in  # recurring texts: the prior has work to do
                 enumerate(zip(pool["property_id"].to_pylist(), pool["question"].to_pylist()))]
    pool = pool.set_column(pool.schema.get_field_index("question"), "question", pa.array(questions, pa.string()))
    train, test = pool.slice(0, 2_000), pool.slice(2_000)
    parts = [(train.slice(0, 700), test.slice(0, 400)), (train.slice(700), test.slice(400, 0)), (train.slice(0, 0), test.slice(400))]
    whole = bias_report(train, test)
    assert bias_report_parts(lambda: iter(parts), spill_dir=tmp_path / "buckets", buckets=5) == whole
    assert whole["baselines"]["question_prior_coverage"] == 0.5 and whole["intervals"]["question_prior"]["n"] == 1_000


def test_question_prior_ties_unseen_and_null_texts():
    import polars as pl

    from reasonvqa.tasks.balance.bias import _question_prior, _Tally

    train = pl.DataFrame({"question": ["q", "q", "q", "q", "r", None, "n", "n"], "answer": ["a", "b", "a", "b", "b", "x", None, None]})
    test = pl.DataFrame({"question": ["q", "q", "r", "s", None, "n", "r"], "answer": ["a", "c", "b", "b", "x", None, None],
                         "nc": pl.Series([4, 4, 5, 2, 5, 4, 4], dtype=pl.UInt32)})
    tally = _Tally()
    _question_prior(train, test, tally)
    # q: a and b tie (1/2 each, c none); r: b; s and a null text: unseen, chance; n: the null answer is its top answer
    assert tally.credits["question_prior"] == {0.5: 2, 0.0: 2, 1.0: 2, 0.2: 1}
    assert tally.credits["question_prior_coverage"] == {1.0: 5, 0.0: 2}


def test_an_empty_choices_list_counts_as_no_choices():
    """A released question with ``[]`` choices (a free-form kind's way of having none) is left out like a null one."""
    rows = [
        dict(question="q1", answer="10 m", choices=["8 m", "10 m", "12 m", "20 m"], answer_category="number"),
        dict(question="q2", answer="A", choices=["A", "B", "C", "D"], answer_category="literal"),
    ]
    without = [dict(question="q3", answer="yes", choices=None, answer_category="literal"),
               dict(question="q4", answer="5", choices=None, answer_category="number")]
    empty = [dict(row, choices=[]) for row in without]
    expected = bias_report(_table(rows + without), _table(rows))
    assert bias_report(_table(rows + empty), _table(rows)) == expected
    assert expected["questions"] == 4 and expected["test_questions"] == 2 and expected["chance"] == 0.25
    assert expected["baselines"]["numeric_questions"] == 2
    # a release whose every question has [] choices has no multiple-choice question, like one of free-form kinds
    only_empty = bias_report(_table(empty), _table(empty))
    assert only_empty == bias_report(_table(without), _table(without))
    assert only_empty["questions"] == 0 and only_empty["chance"] is None and only_empty["baselines"] == {}


def test_choices_that_are_all_null_are_never_picked():
    """Null choices leave the release's choice dictionary empty: most-frequent-choice credits nothing (it crashed)."""
    rows = [dict(question="q1", answer="A", choices=[None], answer_category="literal"),
            dict(question="q2", answer="B", choices=[None, None], answer_category="literal")]
    report = bias_report(_table(rows), _table(rows[:1]))
    assert report["questions"] == 3 and report["chance"] == round((1 + 1 / 2 + 1) / 3, 4)
    assert report["baselines"]["most_frequent_choice"] == 0.0 and report["baselines"]["question_prior"] == 1.0


def test_hash_shared_keeps_only_texts_on_both_sides():
    import polars as pl

    from reasonvqa.tasks.balance.bias import _hash_shared

    train = pl.Series(["q", "r", "q", None, "t"])
    test = pl.Series(["s", "q", None, "t", "u"])
    shared_test, shared_train = _hash_shared(train, test)
    # equal texts hash equal (null included): only q, t and the null are on both sides
    assert shared_test.tolist() == [False, True, True, True, False]
    assert shared_train.tolist() == [True, False, True, True, True]


def test_question_prior_is_the_same_without_the_hash_filter(monkeypatch):
    """Every row passed to the exact codes (as if every hash collided) gives the same credits."""
    import numpy as np
    import polars as pl

    from reasonvqa.tasks.balance import bias

    train = pl.DataFrame({"question": ["q", "q", "r", "x", None], "answer": ["a", "b", "b", "a", "a"]})
    test = pl.DataFrame({"question": ["q", "r", "s", None, "x"], "answer": ["a", "c", "b", "a", "a"],
                         "nc": pl.Series([2, 4, 5, 2, 4], dtype=pl.UInt32)})
    filtered, unfiltered = bias._Tally(), bias._Tally()
    bias._question_prior(train, test, filtered)
    monkeypatch.setattr(bias, "_hash_shared", lambda tr, te: (np.ones(len(te), bool), np.ones(len(tr), bool)))
    bias._question_prior(train, test, unfiltered)
    assert filtered.credits == unfiltered.credits
    assert filtered.credits["question_prior"] == {0.5: 2, 0.0: 1, 0.2: 1, 1.0: 1}  # q ties a/b; r wrong; s, null: chance; x hit
    assert filtered.credits["question_prior_coverage"] == {1.0: 3, 0.0: 2}


def test_a_baseline_whose_credits_are_all_null_is_not_scored():
    """Null credits are not scored: a baseline with only null credits has no mean (it was round(None) -> TypeError),
    and one with some null credits is measured on its non-null ones."""
    import polars as pl

    from reasonvqa.tasks.balance.bias import _Tally

    tally = _Tally()
    tally.add("chance", pl.DataFrame({"c": [0.25, 0.25, 0.5, None]}))
    tally.add("median", pl.DataFrame({"c": [None, None]}, schema={"c": pl.Float64}))
    tally.add("most_frequent_choice", pl.DataFrame({"c": [1.0, 0.0, None]}))
    report = tally.report()
    assert report["questions"] == 3 and report["chance"] == round(1 / 3, 4)
    assert report["baselines"] == {"most_frequent_choice": 0.5}
    assert set(report["intervals"]) == {"most_frequent_choice"} and report["intervals"]["most_frequent_choice"]["n"] == 2
