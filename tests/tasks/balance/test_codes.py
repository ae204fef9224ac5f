import numpy as np
import pyarrow as pa

from reasonvqa.tasks.balance import codes


def test_dense_codes_follow_code_point_order_and_keep_nulls():
    column = pa.chunked_array([["b", None, "é"], ["Z", "b", "a", ""]])
    values, sorted_values = codes.dense_codes(column)
    assert sorted_values.to_pylist() == sorted(["b", "é", "Z", "a", ""])
    assert values.tolist() == [3, -1, 4, 1, 3, 2, 0]


def test_sort_order_is_stable_with_nulls_last():
    column = pa.array(["b", None, "a", "b", None])
    assert codes.sort_order(column).tolist() == [2, 0, 3, 1, 4]
    assert codes.sort_order(pa.array(["a", "b", "c"])).tolist() == [0, 1, 2]


def test_repeats_in_order_marks_later_copies():
    column = pa.array(["x", "y", "x", None, None, "y"])
    order = codes.sort_order(column)
    assert codes.repeats_in_order(column, order).tolist() == [False, False, True, False, False, True]


def test_take_rows_equals_arrow_take_with_lists_nulls_and_repeats():
    n = 20_000  # above the small-column threshold so the dictionary path runs too
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "s": pa.array([f"v{i % 7}" if i % 11 else None for i in range(n)]),
            "u": pa.array([f"unique-{i}" for i in range(n)]),
            "l": pa.array([[f"a{i % 3}"] * (i % 4) if i % 13 else None for i in range(n)], pa.list_(pa.string())),
            "k": pa.array(np.arange(n, dtype=np.int8)),
        }
    )
    rows = rng.integers(0, n, size=n + 17)
    assert codes.take_rows(table, rows).equals(table.take(pa.array(rows)))
    assert codes.take_rows(table, np.array([], dtype=np.int64)).equals(table.take(pa.array([], pa.int64())))
