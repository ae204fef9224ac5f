import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonvqa.tasks.balance import keys


def test_keys_of_are_distinct_so_key_order_is_the_stable_argsort():
    random_key = keys.keys_of(keys.salt(7, "hop_mix"), np.arange(50_000))
    assert len(np.unique(random_key)) == len(random_key)
    assert keys.key_order(random_key).tolist() == np.argsort(random_key, kind="stable").tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=40), st.integers(-1, 45))
def test_key_order_and_first_by_key_equal_the_stable_argsort_with_repeated_keys(values, k):
    key = np.array(values, dtype=np.uint64)
    stable = np.argsort(key, kind="stable")
    assert keys.key_order(key).tolist() == stable.tolist()
    expected = np.zeros(len(key), dtype=bool)
    expected[stable[:max(k, 0)]] = True
    assert keys.first_by_key(key, k).tolist() == expected.tolist()


def test_key_order_finds_a_repeat_across_its_check_blocks(monkeypatch):
    """The distinctness check runs block by block; a repeat astride two blocks still falls back to the stable sort."""
    monkeypatch.setattr(keys, "_CHECK_ROWS", 2)
    key = np.array([9, 4, 1, 4, 7, 3], dtype=np.uint64)  # sorted: 1 3 4 4 7 9, the 4s at positions 2 and 3
    assert keys.key_order(key).tolist() == [2, 5, 1, 3, 4, 0]
    distinct = np.array([9, 4, 1, 5, 7, 3], dtype=np.uint64)
    assert keys.key_order(distinct).tolist() == np.argsort(distinct, kind="stable").tolist()
