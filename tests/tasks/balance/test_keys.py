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
