import numpy as np

from reasonvqa.rows import INT32_ROWS, row_dtype, row_numbers


def test_row_dtype_is_int32_up_to_2_31_rows_and_int64_beyond():
    """Values of a table of n rows lie in -1..n: int32 holds them up to n = 2^31 - 1, not one row more."""
    assert INT32_ROWS == 2**31 - 1 == np.iinfo(np.int32).max
    assert row_dtype(0) == np.int32
    assert row_dtype(2**31 - 1) == np.int32
    assert row_dtype(2**31) == np.int64
    assert row_dtype(42_000_000) == np.int32
    assert row_dtype(10**12) == np.int64


def test_row_numbers_are_arange_in_the_row_dtype():
    rows = row_numbers(5)
    assert rows.dtype == np.int32 and rows.tolist() == [0, 1, 2, 3, 4]
    assert row_numbers(0).tolist() == []
