import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import numpy as np

from reasonvqa.tasks.balance.balance import REMOVED, balance_questions, no_choices, pair_codes
from reasonvqa.tasks.balance.config import BalanceConfig
from tests.tasks.balance.conftest import MODERATE, answers_of, pool_of, question
from tests.tasks.balance.reference import reference_balance


def parquet_bytes(table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_worked_example_rounds_and_counts(skewed_pool):
    result = balance_questions(skewed_pool, MODERATE, seed=0)
    # Paris 9, Rome 3, Bern 1 with bound 1.5, max ratio 3, at most 25% per round:
    # round 1: Paris 9 -> 6 (1.5 x tail 4), Rome 3 -> 2 (25% cap); round 2: 6 -> 4, 2 -> 1; round 3: 4 -> 3.
    assert answers_of(result.kept, "P36") == {"Paris": 3, "Rome": 1, "Bern": 1}
    assert answers_of(result.kept, "P30") == {"Europe": 2, "Asia": 2}
    report = result.report
    assert [(r["round"], r["removed"], r["questions_after"]) for r in report["rounds"]] == [(1, 4, 13), (2, 3, 10), (3, 1, 9)]
    assert report["rounds"][0]["by_reason"] == {"head_tail_bound": 4}
    assert report["converged"] is True
    assert report["questions_in"] == 17 and report["questions_kept"] == 9 and report["questions_removed"] == 8
    assert report["groups"]["P36"]["entropy_before"] == pytest.approx(1.1401, abs=1e-4)  # -(9/13 log 9/13 + 3/13 log 3/13 + 1/13 log 1/13)
    assert report["groups"]["P36"]["entropy_after"] == pytest.approx(1.3710, abs=1e-4)
    assert report["groups"]["P36"]["bound_violations"] == []


def test_pair_codes_do_not_overflow_narrow_codes():
    """int32 group and answer codes whose pair code passes 2^31: computed in int64, in pair order."""
    group = np.array([70_000, 0, 70_000], np.int32)
    answer = np.array([69_999, 5, 0], np.int32)
    pair = pair_codes(group, answer)
    assert pair.dtype == np.int64
    assert pair.tolist() == [70_000 * 70_000 + 69_999, 5, 70_000 * 70_000]
    assert pair[0] > np.iinfo(np.int32).max and group.dtype == np.int32  # the inputs are left as they are


def test_decision_rows_are_int32_below_2_31_rows(skewed_pool):
    result = balance_questions(skewed_pool, MODERATE, seed=0)
    assert result.kept_rows.dtype == result.removed_rows.dtype == result.question_id_order.dtype == np.int32


def test_pool_equals_kept_plus_removed(skewed_pool):
    result = balance_questions(skewed_pool, MODERATE, seed=0)
    assert result.removed.schema.equals(REMOVED)
    kept, removed = result.kept["question_id"].to_pylist(), result.removed["question_id"].to_pylist()
    assert sorted(kept + removed) == sorted(skewed_pool["question_id"].to_pylist())
    assert kept == sorted(kept) and removed == sorted(removed)
    assert set(result.removed["round"].to_pylist()) == {1, 2, 3}
    assert result.kept.schema.equals(skewed_pool.schema)


def test_removal_prefers_images_with_most_questions(skewed_pool):
    # vg:0..3 carry a P30 question too: their Paris questions go before any other.
    result = balance_questions(skewed_pool, MODERATE, seed=0)
    kept_paris_images = {
        r["image_id"] for r in result.kept.to_pylist() if r["answer"] == "Paris"
    }
    assert kept_paris_images.isdisjoint({"vg:0", "vg:1", "vg:2", "vg:3"})
    assert len(kept_paris_images) == 3


def test_seed_breaks_ties_deterministically(skewed_pool):
    picks = {
        seed: tuple(balance_questions(skewed_pool, MODERATE, seed=seed).kept["question_id"].to_pylist())
        for seed in range(8)
    }
    assert len(set(picks.values())) > 1  # different seeds pick different Paris/Rome questions
    again = balance_questions(skewed_pool, MODERATE, seed=3)
    assert tuple(again.kept["question_id"].to_pylist()) == picks[3]


def test_same_seed_same_bytes(skewed_pool):
    a = balance_questions(skewed_pool, MODERATE, seed=5)
    b = balance_questions(skewed_pool, MODERATE, seed=5)
    assert parquet_bytes(a.kept) == parquet_bytes(b.kept)
    assert parquet_bytes(a.removed) == parquet_bytes(b.removed)
    assert a.report == b.report


def test_input_row_order_does_not_matter(skewed_pool):
    shuffled = skewed_pool.take(list(reversed(range(skewed_pool.num_rows))))
    a = balance_questions(skewed_pool, MODERATE, seed=1)
    b = balance_questions(shuffled, MODERATE, seed=1)
    assert a.kept.equals(b.kept) and a.removed.equals(b.removed)


def test_invalid_rows_are_removed_with_reasons_in_round_zero():
    rows = [
        question("q1", "vg:1", "P17", "France"),
        question("q1", "vg:2", "P17", "Spain"),  # repeated id: the first occurrence stays
        question(None, "vg:3", "P17", "Italy"),
        question("q4", "vg:4", "P17", None),
        question("q5", "vg:5", "P17", ""),
        question("q6", "vg:6", None, "Peru"),
        question("q7", None, "P17", "Chile"),
        question("q8", "vg:8", "P17", "Spain"),
    ]
    result = balance_questions(pool_of(rows), BalanceConfig(), seed=0)
    assert result.kept["question_id"].to_pylist() == ["q1", "q8"]
    assert result.kept["answer"].to_pylist() == ["France", "Spain"]
    removed = result.removed.to_pylist()
    assert [(r["question_id"], r["reason"], r["round"]) for r in removed] == [
        ("q1", "duplicate_question_id", 0),
        ("q4", "missing_answer", 0),
        ("q5", "missing_answer", 0),
        ("q6", "missing_property_id", 0),
        ("q7", "missing_image_id", 0),
        (None, "missing_question_id", 0),
    ]
    assert result.report["removed_by_reason"] == {
        "duplicate_question_id": 1,
        "missing_answer": 2,
        "missing_image_id": 1,
        "missing_property_id": 1,
        "missing_question_id": 1,
    }
    assert any("removed invalid questions" in w for w in result.report["warnings"])


def test_empty_question_id_is_invalid_like_a_missing_one():
    rows = [
        question("", "vg:1", "P17", "France"),
        question("", "vg:2", "P17", "Spain"),
        question("q3", "vg:3", "P17", "Italy"),
    ]
    result = balance_questions(pool_of(rows), BalanceConfig(), seed=0)
    assert result.kept["question_id"].to_pylist() == ["q3"]
    assert [(r["question_id"], r["reason"]) for r in result.removed.to_pylist()] == [
        ("", "missing_question_id"),
        ("", "missing_question_id"),
    ]
    assert result.report["removed_by_reason"] == {"missing_question_id": 2}


def test_templated_question_without_choices_is_invalid():
    """A templated row (kind "template" or null) with no choices (null or []) is removed with reason
    missing_choices; free-form kinds (grounded, verified) have none by design and stay."""
    rows = [
        question("q1", "vg:1", "P17", "France"),
        question("q2", "vg:2", "P17", "Spain", choices=[]),
        question("q3", "vg:3", "P17", "Spain", choices=None),
        question("q4", "vg:4", "P17", "Spain", choices=[], kind="template"),
        question("q5", "vg:5", "P17", "Spain", kind="template"),
        question("q6", "vg:6", "grounded:exists", "yes", choices=None, kind="grounded", task_type="exists"),
        question("q7", "vg:7", "verified:count", "no", choices=[], kind="verified", task_type="count"),
        question("q8", "vg:8", "P17", "", choices=[]),  # missing_answer comes first
    ]
    result = balance_questions(pool_of(rows), BalanceConfig(), seed=0)
    assert result.kept["question_id"].to_pylist() == ["q1", "q5", "q6", "q7"]
    assert [(r["question_id"], r["reason"], r["round"]) for r in result.removed.to_pylist()] == [
        ("q2", "missing_choices", 0),
        ("q3", "missing_choices", 0),
        ("q4", "missing_choices", 0),
        ("q8", "missing_answer", 0),
    ]
    assert result.report["removed_by_reason"] == {"missing_answer": 1, "missing_choices": 3}
    slow = reference_balance(pool_of(rows), BalanceConfig(), seed=0)
    assert slow.removed.equals(result.removed) and slow.report == result.report


def test_a_choices_column_of_nulls_only_is_no_choices():
    # a pool made without the QUESTIONS schema (e.g. from polars, every choice None) has a column of Arrow type null
    pool = pa.table({"choices": pa.nulls(2), "kind": pa.array(["template", "verified"])})
    assert pa.types.is_null(pool["choices"].type)
    assert no_choices(pool).to_pylist() == [True, False]


def test_single_answer_group_is_kept_and_reported():
    rows = [question(f"q{i}", f"vg:{i}", "P31", "human") for i in range(5)]
    result = balance_questions(pool_of(rows), BalanceConfig(), seed=0)
    assert result.kept.num_rows == 5 and result.removed.num_rows == 0
    assert result.report["single_answer_groups"] == ["P31"]
    assert any("single answer" in w for w in result.report["warnings"])


def test_empty_pool_gives_empty_result():
    result = balance_questions(pool_of([]), BalanceConfig(), seed=0)
    assert result.kept.num_rows == 0 and result.removed.num_rows == 0
    assert result.report["questions_in"] == 0 and result.report["rounds"] == []


def test_disabled_balancing_keeps_every_valid_question(skewed_pool):
    result = balance_questions(skewed_pool, BalanceConfig(enabled=False), seed=0)
    assert result.kept.num_rows == skewed_pool.num_rows
    assert result.report["rounds_run"] == 0 and result.report["warnings"] == []


def test_round_limit_reports_unfinished_balancing(skewed_pool):
    result = balance_questions(skewed_pool, MODERATE.model_copy(update={"rounds": 1}), seed=0)
    assert result.report["rounds_run"] == 1 and result.report["converged"] is False
    assert answers_of(result.kept, "P36") == {"Paris": 6, "Rome": 2, "Bern": 1}
    assert any("before reaching its fixed point" in w for w in result.report["warnings"])


def test_only_top_k_answers_are_cut():
    rows = [question(f"a{i}", f"vg:{i}", "P17", "A") for i in range(20)]
    rows += [question(f"b{i}", f"vg:{100 + i}", "P17", "B") for i in range(4)]
    rows += [question("c0", "vg:200", "P17", "C")]
    result = balance_questions(pool_of(rows), MODERATE.model_copy(update={"top_k": 1, "max_round_fraction": 1.0}), seed=0)
    # Only A (rank 1) is bounded: 1.5 x tail 5 = 7; B is left at 4 though 4 > 1.5 x 1.
    assert answers_of(result.kept) == {"A": 7, "B": 4, "C": 1}
    assert result.report["rounds"][0]["by_reason"] == {"head_tail_bound": 13}


def test_max_ratio_binds_before_the_tail_bound():
    rows = [question(f"a{i}", f"vg:{i}", "P17", "A") for i in range(30)]
    rows += [question(f"c{i}", f"vg:{200 + i}", "P17", "C") for i in range(20)]
    rows += [question(f"d{i}", f"vg:{300 + i}", "P17", "D") for i in range(20)]
    result = balance_questions(pool_of(rows), MODERATE.model_copy(update={"max_ratio": 1.2, "max_round_fraction": 1.0}), seed=0)
    # A 30 vs next C 20: cap 1.2 x 20 = 24 (the tail bound would allow 1.5 x 40)
    assert answers_of(result.kept) == {"A": 24, "C": 20, "D": 20}
    assert result.report["removed_by_reason"] == {"max_ratio": 6}


def test_missing_column_is_a_clear_error(skewed_pool):
    with pytest.raises(ValueError, match="lacks required column"):
        balance_questions(skewed_pool.drop_columns(["property_id"]), BalanceConfig(), seed=0)


def test_config_rejects_inconsistent_ratios():
    with pytest.raises(ValueError, match="max_ratio"):
        BalanceConfig(min_ratio=2.0, max_ratio=1.5, head_tail_bound=2.0)
    with pytest.raises(ValueError, match="head_tail_bound"):
        BalanceConfig(min_ratio=1.6, head_tail_bound=1.5)


@pytest.mark.parametrize("config", [BalanceConfig(), BalanceConfig(max_round_fraction=1.0, head_tail_bound=1.0)])
def test_reference_matches_on_literal_pool(skewed_pool, config):
    fast, slow = balance_questions(skewed_pool, config, 2), reference_balance(skewed_pool, config, 2)
    assert fast.kept.equals(slow.kept) and fast.removed.equals(slow.removed) and fast.report == slow.report


@pytest.mark.parametrize("seed", [0, 4])
def test_rounds_track_the_counts_a_recount_gives(seed):
    """The pair and image counts the rounds keep up to date equal a bincount of the surviving rows."""
    import numpy as np

    from reasonvqa import codes
    from reasonvqa.tasks.balance.balance import _encode, _run_rounds
    from tests.tasks.balance.synthetic import synthetic_pool

    pool = synthetic_pool(3_000, 300, 12, seed=seed)
    enc = _encode(codes.ColumnCodes(pool), np.arange(pool.num_rows), seed)
    state = _run_rounds(enc, BalanceConfig())
    assert len(state.rounds) > 1 and not state.alive.all()  # balancing removed rows over several rounds
    for tracked, column, n in ((state.pair_counts, enc.pair, enc.n_pairs), (state.image_counts, enc.image, enc.n_images)):
        assert tracked.tolist() == np.bincount(column[state.alive], minlength=n).tolist()
    assert state.pair_counts_before.tolist() == np.bincount(enc.pair, minlength=enc.n_pairs).tolist()
    assert state.image_counts_before.tolist() == np.bincount(enc.image, minlength=enc.n_images).tolist()
    assert int(state.pair_counts.sum()) == int(state.alive.sum()) < int(state.pair_counts_before.sum()) == pool.num_rows
