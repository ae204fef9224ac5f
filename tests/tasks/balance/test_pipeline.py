"""pipeline.pairs_seen_in_train (hashed pairs, text check of the candidates) against a plain-Python oracle."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonvqa.tasks.balance import pipeline

TEXTS = ["what?", "what", "a\x1fb", "", "é", None]


def pairs_table(rows: list[tuple]) -> pa.Table:
    return pa.table({"question": pa.array([q for q, _ in rows], pa.string()),
                     "answer": pa.array([a for _, a in rows], pa.string())})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TEXTS), st.sampled_from(TEXTS)), min_size=1, max_size=30), st.data())
def test_seen_in_train_equals_the_text_comparison(rows, data):
    table = pairs_table(rows)
    n = len(rows)
    test = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=n)), dtype=np.int64)
    train = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=n)), dtype=np.int64)
    assert pipeline.pairs_seen_in_train(table, test, train).tolist() == seen_by_hand(rows, test, train)
    assert pipeline.pairs_seen_as_text(table, test, train).tolist() == seen_by_hand(rows, test, train)


def seen_by_hand(rows: list[tuple], test, train) -> list[bool]:
    """Plain-Python oracle: a pair is its question and answer joined by \x1f (null when either is null,
    and nulls match each other); a test row is seen when its pair is among the train rows' pairs."""
    def joined(row: int) -> str | None:
        question, answer = rows[row]
        return None if question is None or answer is None else f"{question}\x1f{answer}"

    in_train = {joined(int(row)) for row in train}
    return [joined(int(row)) in in_train for row in test]


def test_seen_in_train_hashes_pairs_unless_a_text_holds_the_separator():
    table = pairs_table([("q1", "a"), ("q1", "b"), ("q2", "a"), (None, "a"), ("q1", None)])
    coded = pipeline.codes.ColumnCodes(table)
    key = pipeline._pair_keys(table, coded)
    assert len(set(key[:3].tolist())) == 3 and key[3] == key[4] == 0  # null pairs match each other
    assert pipeline._pair_keys(pairs_table([("a\x1fb", "c"), ("a", "b\x1fc")]), coded) is None
    assert pipeline.pairs_seen_in_train(table, np.array([1, 2, 4]), np.array([0, 3])).tolist() == [False, False, True]


def test_seen_in_train_checks_hash_collisions_as_text(monkeypatch):
    table = pairs_table([("q1", "a"), ("q2", "b"), ("q1", "a"), ("q3", "c")])
    monkeypatch.setattr(pipeline, "_pair_keys", lambda pool, coded: np.zeros(pool.num_rows, np.uint64))
    assert pipeline.pairs_seen_in_train(table, np.array([2, 1, 3]), np.array([0])).tolist() == [True, False, False]


def test_a_null_hop_count_is_a_hop_of_its_own_in_the_hop_mix():
    """A null n_hop was cast from NaN to an arbitrary integer; it is kept whole and reported as "<none>"."""
    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from tests.tasks.balance.conftest import pool_of, question

    rows = [question(f"q{i}", f"vg:{i}", "P1", f"a{i % 4}", n_hop=None if i < 3 else 1 + i % 2) for i in range(12)]
    balanced, _ = pipeline.decide(pool_of(rows), BalanceConfig(hop_shares={1: 0.5, 2: 0.5}), SplitConfig(), 0)
    mix = balanced.report["hop_mix"]
    assert mix["before"] == {"<none>": 3, "1": 4, "2": 5} and mix["after"] == {"<none>": 3, "1": 4, "2": 4}
    assert balanced.report["removed_by_reason"]["hop_mix"] == 1
    assert pipeline._hops(pa.array([2, None, 0], pa.int8())).tolist() == [2, pipeline.NO_HOP, 0]


def test_question_answer_pairs_join_string_and_large_string_columns():
    for question_type, answer_type in [(pa.large_string(), pa.large_string()), (pa.string(), pa.large_string()),
                                       (pa.string(), pa.string())]:
        table = pa.table({"question": pa.array(["Where?", None], question_type), "answer": pa.array(["Paris", "x"], answer_type)})
        assert pipeline.question_answer_pairs(table).to_pylist() == ["Where?\x1fParis", None]


def test_decide_keeps_codes_only_of_columns_the_group_keys_leave_alone():
    import pytest

    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from tests.tasks.balance.conftest import pool_of, question

    pool = pool_of([question(f"q{i}", f"vg:{i}", "P17", "France") for i in range(4)])
    kept, _ = pipeline.decide(pool, BalanceConfig(), SplitConfig(), 0, keep_codes=("answer",))
    assert kept.pool_codes["answer"][1].to_pylist() == ["France"]
    with pytest.raises(ValueError, match="property_id"):  # the group keys rewrite it for kinds without one
        pipeline.decide(pool, BalanceConfig(), SplitConfig(), 0, keep_codes=("property_id",))


def test_check_partition_takes_each_row_exactly_once():
    check_partition = pipeline.check_partition
    check_partition(5, np.array([3, 0], np.int32), np.array([4]), np.array([2, 1]))
    check_partition(0, np.zeros(0, np.int32))
    for parts in ([np.array([0, 1, 2, 3])], [np.array([0, 1, 2, 3, 3])], [np.array([0, 1, 2, 3, 3, 4])],
                  [np.array([0, 1, 2, 3, -1])], [np.array([0, 1, 2, 3, 5])]):
        with pytest.raises(AssertionError, match="partition"):
            check_partition(5, *parts)
