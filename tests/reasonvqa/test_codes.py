from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pytest
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonvqa import codes


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


# Byte order: hypothesis draws strings from a small alphabet so that shared prefixes, values that are
# prefixes of others, NUL bytes, multi-byte characters and duplicates are common.
STRING_ALPHABET = ["a", "b", "\x00", "é", "\U0001F600", "abcdefgh", "abcdefg\x00", "\x7f"]
strings = st.lists(st.one_of(st.none(), st.lists(st.sampled_from(STRING_ALPHABET), max_size=5).map("".join)), max_size=40)


def arrow_order(column) -> tuple[list[int], list[bool]]:
    array = codes.combined(column)
    order = pc.array_sort_indices(array).to_numpy()
    return order.tolist(), codes.repeats_in_order(array, order).tolist()


def chunked(values: list, cut: int, type_: pa.DataType) -> pa.ChunkedArray:
    whole = pa.array(values, type_)
    cut = min(cut, len(values))
    return pa.chunked_array([whole.slice(0, cut), pa.array([], type_), whole.slice(cut)], type_)


@settings(max_examples=300, deadline=None)
@given(strings, st.integers(0, 40), st.sampled_from([pa.string(), pa.large_string(), pa.binary()]))
def test_byte_order_equals_arrow_sort_on_any_strings(values, cut, type_):
    if type_ == pa.binary():
        values = [None if v is None else v.encode() for v in values]
    for column in (pa.array(values, type_), chunked(values, cut, type_), pa.array(["zz"] + values, type_).slice(1)):
        order, repeat = codes.byte_order(column)
        assert (order.tolist(), repeat.tolist()) == arrow_order(column)
        assert codes.sort_order(column).tolist() == order.tolist()


def test_byte_order_ties_on_first_bytes_are_ordered_by_later_bytes_and_length():
    column = pa.array(["abcdefgh2", "abcdefgh", "abcdefgh\x00", "abcdefgh1", None, "abcdefgh", "abcdefg"])
    order, repeat = codes.byte_order(column)
    assert order.tolist() == [6, 1, 5, 2, 3, 0, 4]
    assert repeat.tolist() == [False, False, False, False, False, True, False]
    assert (order.tolist(), repeat.tolist()) == arrow_order(column)


def test_byte_order_leaves_other_types_and_mostly_tied_columns_to_arrow(monkeypatch):
    assert codes.byte_order(pa.array([3, 1, 2])) is None
    column = pa.array(["same-prefix-b", "same-prefix-a", "other", "same-prefix-a"])
    monkeypatch.setattr(codes, "_FALLBACK_MIN_TIED", 1)
    assert codes.byte_order(column) is None
    order, repeat = codes.sort_with_repeats(column)
    assert (order.tolist(), repeat.tolist()) == ([2, 1, 3, 0], [False, False, False, True])


def test_dense_codes_of_empty_and_all_null_columns():
    assert codes.dense_codes(pa.array([], pa.string()))[0].tolist() == []
    values, sorted_values = codes.dense_codes(pa.array([None, None], pa.string()))
    assert values.tolist() == [-1, -1] and sorted_values.to_pylist() == []


def test_column_codes_compute_each_column_once_and_match_the_functions():
    table = pa.table({"q": ["b", None, "a", "", "b"], "i": ["x", "", None, "y", "x"]})
    coded = codes.ColumnCodes(table)
    assert coded.dense("i") is coded.dense("i")
    assert coded.dense("i")[0].tolist() == codes.dense_codes(table["i"])[0].tolist()
    assert coded.missing("i").tolist() == codes.missing(table["i"]).tolist() == [False, True, True, False, False]
    assert coded.missing("q").tolist() == codes.missing(table["q"]).tolist()
    order, repeat = coded.sorted("q")
    assert (order.tolist(), repeat.tolist()) == arrow_order(table["q"])


@settings(max_examples=200, deadline=None)
@given(strings.filter(len), st.data())
def test_column_codes_order_of_rows_equals_sorting_the_taken_rows(values, data):
    table = pa.table({"q": pa.array(values, pa.string())})
    rows = np.array(data.draw(st.lists(st.integers(0, len(values) - 1), max_size=30)), dtype=np.int64)
    expected = codes.sort_order(table["q"].take(pa.array(rows, pa.int64()))).tolist()
    assert codes.ColumnCodes(table).order_of("q", rows).tolist() == expected  # before the column's own sort
    coded = codes.ColumnCodes(table)
    coded.sorted("q")
    assert coded.order_of("q", rows).tolist() == expected  # from the column's sort


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 9), st.integers(0, (1 << 64) - 1))),
       st.lists(st.one_of(st.integers(0, 9), st.integers(0, (1 << 64) - 1))))
def test_mutual_in_equals_numpy_isin_both_ways(a, b):
    a, b = np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64)
    a_in_b, b_in_a = codes.mutual_in(a, b)
    assert a_in_b.tolist() == np.isin(a, b).tolist() and b_in_a.tolist() == np.isin(b, a).tolist()


def test_mutual_in_masks_by_value():
    a_in_b, b_in_a = codes.mutual_in(np.array([5, 1, 7, 5, 0], np.uint64), np.array([7, 3, 5, 5], np.uint64))
    assert a_in_b.tolist() == [True, False, True, True, False]
    assert b_in_a.tolist() == [True, False, True, True]
    b_in_a, a_in_b = codes.mutual_in(np.array([7, 3, 5, 5], np.uint64), np.array([5, 1, 7, 5, 0], np.uint64))
    assert (a_in_b.tolist(), b_in_a.tolist()) == ([True, False, True, True, False], [True, False, True, True])  # swapped
    disjoint = codes.mutual_in(np.array([1, 2], np.uint64), np.array([3, 4, 5], np.uint64))  # nothing shared
    assert [m.tolist() for m in disjoint] == [[False, False], [False, False, False]]
    empty_in, none_in = codes.mutual_in(np.zeros(0, np.uint64), np.array([1], np.uint64))
    assert empty_in.tolist() == [] and none_in.tolist() == [False]


def test_column_codes_take_through_dense_codes_equals_arrow_take():
    table = pa.table({"a": pa.chunked_array([["x", None], ["", "y", "x"]])})
    rows = np.array([4, 1, 2, 0, 1], dtype=np.int64)
    plain = codes.ColumnCodes(table).take("a", rows)  # no dense codes yet: Arrow's take
    coded = codes.ColumnCodes(table)
    coded.dense("a")
    expected = table["a"].take(pa.array(rows)).combine_chunks()
    assert plain.equals(expected) and coded.take("a", rows).equals(expected)
    assert coded.take("a", np.array([], dtype=np.int64)).to_pylist() == []
    empty = codes.ColumnCodes(pa.table({"a": pa.array([None], pa.string())}))
    empty.dense("a")
    assert empty.take("a", np.array([0, 0])).to_pylist() == [None, None]


def test_column_codes_join_a_column_once_for_every_take():
    table = pa.table({"a": pa.chunked_array([["x", None], ["", "y", "x"]])})
    coded = codes.ColumnCodes(table)
    joined = coded.combined("a")
    assert joined.to_pylist() == ["x", None, "", "y", "x"] and coded.combined("a") is joined
    assert coded.take("a", np.array([3, 0], np.int64)).to_pylist() == ["y", "x"]
    assert coded.combined("a") is joined  # the take went through the joined column, not a new join
    single = pa.table({"a": ["p", "q"]})
    same_data = codes.ColumnCodes(single).combined("a").buffers()[2].address == single["a"].chunk(0).buffers()[2].address
    assert same_data  # one chunk: not copied


def test_column_codes_prefetch_in_the_background_gives_the_same_codes():
    table = pa.table({"a": ["y", None, "x", "y"], "b": ["1", "2", "1", ""]})
    with ThreadPoolExecutor(max_workers=1) as background:
        coded = codes.ColumnCodes(table, background)
        coded.prefetch(("a", "missing_column", "b"))
        assert coded.dense("a")[0].tolist() == codes.dense_codes(table["a"])[0].tolist() == [1, -1, 0, 1]
        assert coded.take("b", np.array([3, 0])).to_pylist() == ["", "1"]
    with pytest.raises(KeyError):
        coded.dense("missing_column")  # left to the step that needs it


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-5, 40), st.integers(-(1 << 62), 1 << 62))), st.booleans(), st.booleans())
def test_unique_ints_equals_numpy_unique(values, inverse, counts):
    """Counting (small spans) and sorting (wide spans: np.unique) both give np.unique's arrays."""
    values = np.array(values, dtype=np.int64)
    got = codes.unique_ints(values, inverse=inverse, counts=counts)
    expected = np.unique(values, return_inverse=inverse, return_counts=counts)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == 1 + inverse + counts
    assert [a.tolist() for a in got] == [a.tolist() for a in expected]
    assert not inverse or got[1].dtype == np.int64


def test_unique_ints_by_counting_and_by_sorting():
    unique, inverse, counts = codes.unique_ints(np.array([3, 1, 3, 2, 3]), inverse=True, counts=True)
    assert (unique.tolist(), inverse.tolist(), counts.tolist()) == ([1, 2, 3], [2, 0, 2, 1, 2], [1, 1, 3])
    wide = np.array([-(1 << 40), 5, 5], dtype=np.int64)  # a range too wide to count: np.unique
    assert [a.tolist() for a in codes.unique_ints(wide, counts=True)] == [[-(1 << 40), 5], [1, 2]]
    assert [a.tolist() for a in codes.unique_ints(np.array([], np.int64), inverse=True, counts=True)] == [[], [], []]
    with pytest.raises(TypeError, match="bool"):  # [True, False] would index the presence table as a mask
        codes.unique_ints(np.array([True, False]))


def test_unique_ints_inverse_in_the_asked_width():
    """By counting and by sorting, the inverse comes in ``dtype`` (a decision's int32 row codes) with the same values."""
    for values in (np.array([7, 3, 7, 5], np.int32), np.array([1 << 40, 3, 1 << 40, -(1 << 40)], np.int64)):
        unique, inverse = codes.unique_ints(values, inverse=True, dtype=np.int32)
        assert inverse.dtype == np.int32
        assert unique[inverse].tolist() == values.tolist()
    assert codes.unique_ints(np.array([], np.int32), inverse=True, dtype=np.int32)[1].dtype == np.int32


def test_codes_and_orders_of_a_small_table_are_int32():
    column = pa.chunked_array([["b", None, "a"], ["c", "a"]])
    assert codes.dense_codes(column)[0].dtype == np.int32
    assert codes.dense_codes(column)[0].tolist() == [1, -1, 0, 2, 0]
    order, _ = codes.sort_with_repeats(column)
    assert order.dtype == np.int32 and order.tolist() == [2, 4, 0, 3, 1]
    assert codes.sort_order(pa.array([1, 0, 2])).dtype == np.int32  # Arrow's sort (not bytes)
    coded = codes.ColumnCodes(pa.table({"q": column}))
    coded.sorted("q")
    assert coded.order_of("q", np.array([3, 0, 2], np.int32)).tolist() == [2, 1, 0]
