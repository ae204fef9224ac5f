"""Date answers at their precision and distractors inside the window."""

from __future__ import annotations

import datetime

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.dates import civil_from_days, date_choices, days_from_civil


def _frame(times, precisions, window=20, max_precision=11):
    n = len(times)
    return pl.DataFrame(
        {"time": times, "precision": precisions, "max_precision": [max_precision] * n, "window_years": [window] * n},
        schema={"time": pl.String, "precision": pl.Int8, "max_precision": pl.Int64, "window_years": pl.Int64},
    )


def test_calendar_arithmetic_matches_python_dates():
    for day in [datetime.date(1889, 3, 31), datetime.date(1, 1, 1), datetime.date(2000, 2, 29), datetime.date(1970, 1, 1)]:
        n = days_from_civil(np.array([day.year]), np.array([day.month]), np.array([day.day]))[0]
        assert n == (day - datetime.date(1970, 1, 1)).days
        y, m, d = civil_from_days(np.array([n]))
        assert (y[0], m[0], d[0]) == (day.year, day.month, day.day)


def test_rendering_follows_precision_and_era():
    df = _frame(
        ["+1889-03-31T00:00:00Z", "+1889-03-00T00:00:00Z", "+1889-00-00T00:00:00Z", "-0044-03-15T00:00:00Z", "+1889-03-31T00:00:00Z"],
        [11, 10, 9, 9, 9],
    )
    out = date_choices(df, np.arange(5, dtype=np.uint64), latest_year=2026)
    assert out["answer"].to_list() == ["31 March 1889", "March 1889", "1889", "44 BC", "1889"]
    assert out["reason"].null_count() == 5


def test_template_max_precision_caps_the_fact_precision():
    out = date_choices(_frame(["+1889-03-31T00:00:00Z"], [11], max_precision=9), np.array([7], dtype=np.uint64), 2026)
    assert out["answer"].to_list() == ["1889"]
    assert all(len(out[c][0]) == 4 for c in ("d1", "d2", "d3"))


def test_distractors_are_distinct_within_the_window_and_at_the_same_precision():
    n = 400
    df = _frame(["+1950-06-15T00:00:00Z"] * n, [9] * n, window=5)
    out = date_choices(df, np.arange(n, dtype=np.uint64), latest_year=2026)
    for row in out.iter_rows(named=True):
        years = {int(row[c]) for c in ("d1", "d2", "d3")}
        assert len(years) == 3 and 1950 not in years
        assert all(1945 <= y <= 1955 for y in years)
    months = date_choices(_frame(["+1950-06-00T00:00:00Z"] * 50, [10] * 50, window=2), np.arange(50, dtype=np.uint64), 2026)
    for row in months.iter_rows(named=True):
        for c in ("d1", "d2", "d3"):
            month, year = row[c].split()
            assert month in ("January", "February", "March", "April", "May", "June", "July", "August",
                             "September", "October", "November", "December")
            assert 1948 <= int(year) <= 1952 and row[c] != "June 1950"
    days = date_choices(_frame(["+1950-06-15T00:00:00Z"] * 50, [11] * 50, window=1), np.arange(50, dtype=np.uint64), 2026)
    for row in days.iter_rows(named=True):
        for c in ("d1", "d2", "d3"):
            parsed = datetime.datetime.strptime(row[c], "%d %B %Y").date()
            assert abs((parsed - datetime.date(1950, 6, 15)).days) <= 365 and parsed != datetime.date(1950, 6, 15)


def test_distractors_stay_before_the_latest_year_and_cross_the_era_cleanly():
    out = date_choices(_frame(["+2024-00-00T00:00:00Z"] * 30, [9] * 30, window=10), np.arange(30, dtype=np.uint64), 2026)
    assert all(int(v) <= 2026 for c in ("d1", "d2", "d3") for v in out[c].to_list())
    bc = date_choices(_frame(["+0002-00-00T00:00:00Z"] * 30, [9] * 30, window=3), np.arange(30, dtype=np.uint64), 2026)
    allowed = {"1", "3", "4", "5", "1 BC", "2 BC"}
    assert all(v in allowed for c in ("d1", "d2", "d3") for v in bc[c].to_list())


def test_unusable_dates_get_a_reason():
    df = _frame(
        ["+1900-00-00T00:00:00Z", None, "around 1900", "+1900-13-01T00:00:00Z", "+2026-00-00T00:00:00Z", "+1900-01-01T00:00:00Z"],
        [7, 9, 9, 10, 9, None],
    )
    out = date_choices(df.with_columns(window_years=pl.Series([20, 20, 20, 20, 2, 20])), np.arange(6, dtype=np.uint64), 2026)
    assert out["reason"].to_list() == [
        "date_too_coarse", "empty_answer", "unparsable_date", "unparsable_date", "too_few_distractors", "date_without_precision",
    ]


def test_same_seed_same_distractors():
    df = _frame(["+1889-03-31T00:00:00Z"] * 3, [11] * 3)
    seeds = np.array([11, 12, 11], dtype=np.uint64)
    out = date_choices(df, seeds, 2026)
    assert out.row(0) == out.row(2) and out.row(0) != out.row(1)


def test_a_day_that_its_month_lacks_is_unparsable_not_moved():
    # "30 February 1900" would otherwise render as the day it rolls over to: "2 March 1900"
    df = _frame(["+1900-02-30T00:00:00Z", "+1900-04-31T00:00:00Z", "+2000-02-29T00:00:00Z", "+1900-02-30T00:00:00Z"], [11, 11, 11, 10])
    out = date_choices(df, np.arange(4, dtype=np.uint64), 2026)
    assert out["reason"].to_list() == ["unparsable_date", "unparsable_date", None, None]
    assert out["answer"].to_list()[2:] == ["29 February 2000", "February 1900"]
