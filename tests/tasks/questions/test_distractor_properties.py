"""Property tests: whatever the value, distractors are three, distinct after normalization, never
the answer, and in the answer's unit or precision."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonvqa.tasks.questions.bank import load_bank
from reasonvqa.tasks.questions.dates import date_choices
from reasonvqa.tasks.questions.numbers import number_choices
from reasonvqa.tasks.questions.text import normalize_text


UNITS = load_bank().units


def _distinct_after_normalization(row: dict) -> bool:
    return len({normalize_text(row[c]) for c in ("answer", "d1", "d2", "d3")}) == 4


@settings(max_examples=60, deadline=None)
@given(
    amounts=st.lists(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False), min_size=1, max_size=20),
    unit=st.sampled_from([None, "Q11573", "Q712226", "Q11229"]),
    decimals=st.sampled_from([None, 0, 2]),
    seed=st.integers(min_value=0, max_value=2**63),
)
def test_number_distractors(amounts, unit, decimals, seed):
    n = len(amounts)
    df = pl.DataFrame(
        {"amount": amounts, "unit_qid": [unit] * n, "unit_label": [None] * n, "decimals": [decimals] * n,
         "spread": [0.1] * n, "thousands": [True] * n},
        schema={"amount": pl.Float64, "unit_qid": pl.String, "unit_label": pl.String, "decimals": pl.Int64,
                "spread": pl.Float64, "thousands": pl.Boolean},
    )
    out = number_choices(df, np.arange(seed, seed + n, dtype=np.uint64) % np.uint64(2**63), UNITS)
    suffix = {None: "", "Q11573": " m", "Q712226": " km²", "Q11229": "%"}[unit]
    for amount, row in zip(amounts, out.iter_rows(named=True)):
        if row["reason"] is not None:
            assert row["reason"] == "number_out_of_range"
            continue
        assert _distinct_after_normalization(row)
        values = {c: float(row[c].removesuffix(suffix).replace(",", "")) for c in ("answer", "d1", "d2", "d3")}
        assert all(row[c].endswith(suffix) for c in values)
        # the answer is the amount rounded to the template's decimals (automatic rounding keeps at
        # least whole units, so it is never off by more than half of one)
        step = 10.0 ** -decimals if decimals is not None else 1.0
        assert abs(values["answer"] - amount) <= step / 2 + 1e-9 * max(1.0, abs(amount))
        if decimals is not None:
            fraction = row["answer"].removesuffix(suffix).partition(".")[2]
            assert len(fraction) == decimals
        for c in ("d1", "d2", "d3"):  # same sign as the answer; zero gets positive distractors
            assert (values[c] < 0) == (values["answer"] < 0) and values[c] != 0


@settings(max_examples=60, deadline=None)
@given(
    year=st.integers(min_value=-3000, max_value=2100),
    month=st.integers(min_value=1, max_value=12),
    day=st.integers(min_value=1, max_value=28),
    precision=st.sampled_from([9, 10, 11]),
    window=st.integers(min_value=2, max_value=60),
    seed=st.integers(min_value=0, max_value=2**63),
)
def test_date_distractors(year, month, day, precision, window, seed):
    sign = "-" if year < 0 else "+"
    time = f"{sign}{abs(year):04d}-{month:02d}-{day:02d}T00:00:00Z"
    df = pl.DataFrame(
        {"time": [time], "precision": [precision], "max_precision": [11], "window_years": [window]},
        schema={"time": pl.String, "precision": pl.Int8, "max_precision": pl.Int64, "window_years": pl.Int64},
    )
    row = date_choices(df, np.array([seed], dtype=np.uint64), latest_year=2026).row(0, named=True)
    if row["reason"] is not None:
        assert row["reason"] == "too_few_distractors" and year > 2020
        return
    assert _distinct_after_normalization(row)
    words = {9: 1, 10: 2, 11: 3}[precision]
    for c in ("answer", "d1", "d2", "d3"):
        assert len(row[c].removesuffix(" BC").split()) == words
