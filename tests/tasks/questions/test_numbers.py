"""Number answers with units and sensible rounding; distractors in the same unit."""

from __future__ import annotations

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.numbers import auto_decimals, format_numbers, nice_floor, number_choices


def _frame(amounts, units, labels=None, decimals=None, spread=0.1, thousands=True):
    n = len(amounts)
    return pl.DataFrame(
        {
            "amount": amounts,
            "unit_qid": units,
            "unit_label": labels or [None] * n,
            "decimals": [decimals] * n,
            "spread": [spread] * n,
            "thousands": [thousands] * n,
        },
        schema={"amount": pl.Float64, "unit_qid": pl.String, "unit_label": pl.String, "decimals": pl.Int64,
                "spread": pl.Float64, "thousands": pl.Boolean},
    )


def test_rendering_with_units_rounding_and_separators(bank):
    df = _frame(
        [330, 8848.86, 1.55, 68373433, 12, 3.5, -430.5, 0.25],
        ["Q11573", "http://www.wikidata.org/entity/Q11573", "Q11573", None, "Q11229", "Q99999999", "Q11573", "Q199"],
        labels=[None, None, None, None, None, "furlong", None, None],
    )
    out = number_choices(df, np.arange(8, dtype=np.uint64), bank.units)
    assert out["answer"].to_list() == ["330 m", "8,849 m", "1.55 m", "68,373,433", "12%", "3.5 furlong", "-430 m", "0.25"]
    assert out["reason"].null_count() == 8


def test_template_decimals_and_no_separator(bank):
    out = number_choices(_frame([1234.5678], ["Q11573"], decimals=2, thousands=False), np.array([1], dtype=np.uint64), bank.units)
    assert out["answer"].to_list() == ["1234.57 m"]


def test_distractors_keep_unit_sign_and_distinctness(bank):
    n = 300
    out = number_choices(_frame([11.0] * n, ["Q11573"] * n), np.arange(n, dtype=np.uint64), bank.units)
    for row in out.iter_rows(named=True):
        values = [row[c] for c in ("d1", "d2", "d3")]
        assert len(set(values)) == 3 and "11 m" not in values
        assert all(v.endswith(" m") and 0 < int(v[:-2]) <= 17 for v in values)  # span: 6 steps
    small = number_choices(_frame([1.0] * 50, [None] * 50), np.arange(50, dtype=np.uint64), bank.units)
    assert all(int(v) >= 2 for c in ("d1", "d2", "d3") for v in small[c].to_list())  # positive stays positive
    negative = number_choices(_frame([-1.0] * 50, [None] * 50), np.arange(50, dtype=np.uint64), bank.units)
    assert all(int(v) <= -2 for c in ("d1", "d2", "d3") for v in negative[c].to_list())  # "-1" vs "1" would clash


def test_paper_method_distractors_share_the_answers_trailing_digits(bank):
    out = number_choices(_frame([68373433.0], [None]), np.array([5], dtype=np.uint64), bank.units, method="paper")
    assert all(v.endswith(",373,433") for v in out.row(0)[2:])


def test_distractors_round_like_the_answer_without_trailing_digit_tells(bank):
    n = 200
    out = number_choices(_frame([68373433.0] * n, [None] * n), np.arange(n, dtype=np.uint64), bank.units)
    shared = sum(v.endswith(",433") for c in ("d1", "d2", "d3") for v in out[c].to_list())
    assert shared <= 3  # ~1 in 1000 by chance
    tens = number_choices(_frame([330.0] * n, ["Q11573"] * n), np.arange(n, dtype=np.uint64), bank.units)
    assert all(int(v[:-2]) % 10 == 0 for c in ("d1", "d2", "d3") for v in tens[c].to_list())  # 330 is rounded to 10
    assert not all(int(v[:-2]) % 100 == 0 for v in tens["d1"].to_list())


def test_answer_rank_is_uniform_and_the_mean_rule_is_at_chance(bank):
    n = 4000
    amounts = np.random.default_rng(0).uniform(50, 5000, n).round()
    out = number_choices(_frame(amounts.tolist(), [None] * n), np.arange(n, dtype=np.uint64), bank.units)
    choices = np.array([[float(v.replace(",", "")) for v in out[c].to_list()] for c in ("answer", "d1", "d2", "d3")]).T
    ranks = (choices[:, 1:] < choices[:, :1]).sum(axis=1)
    assert np.allclose(np.bincount(ranks, minlength=4) / n, 0.25, atol=0.03)
    closest = np.abs(choices - choices.mean(axis=1, keepdims=True)).argmin(axis=1)
    assert abs((closest == 0).mean() - 0.25) < 0.04


def test_unusable_numbers_get_a_reason(bank):
    df = _frame([None, 1e16, 3.0, 1e-9], ["Q11573", "Q11573", "Q99999999", "Q11573"])
    out = number_choices(df, np.arange(4, dtype=np.uint64), bank.units)
    assert out["reason"].to_list() == ["empty_answer", "number_out_of_range", "no_english_label", "number_out_of_range"]


def test_helpers():
    assert auto_decimals(np.array([8848.86, 1.55, 11.0, 0.000012, 0.0])).tolist() == [0, 2, 0, 6, 0]
    assert nice_floor(np.array([884.886, 0.155, 1.1, 0.0, 3.0])).tolist() == [500.0, 0.1, 1.0, 0.0, 2.0]
    got = format_numbers(np.array([1234567.0, -2.5, 0.0]), np.array([0, 2, 0]), np.array([True, True, False]))
    assert got.to_list() == ["1,234,567", "-2.50", "0"]
