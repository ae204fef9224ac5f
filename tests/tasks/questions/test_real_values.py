"""Number and date distractors from real values of the same property: neighbours at a uniform rank."""

from __future__ import annotations

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.dates import date_choices
from reasonvqa.tasks.questions.numbers import number_choices
from reasonvqa.tasks.questions.real_values import date_pool, neighbour_distractors, number_pool

ELEVATIONS = [8848.86, 8611, 8586, 8516, 8485, 8188, 8167, 8163, 8126, 8091, 8080, 8051, 8035, 8027]  # 8000ers, metres


def _numbers(amounts, pid="P2044", unit="Q11573"):
    n = len(amounts)
    return pl.DataFrame(
        {"property_id": [pid] * n, "amount": amounts, "unit_qid": [unit] * n, "unit_label": [None] * n,
         "decimals": [None] * n, "spread": [0.1] * n, "thousands": [True] * n},
        schema={"property_id": pl.String, "amount": pl.Float64, "unit_qid": pl.String, "unit_label": pl.String,
                "decimals": pl.Int64, "spread": pl.Float64, "thousands": pl.Boolean},
    )


def _facts(rows):
    return pl.DataFrame(rows, orient="row", schema={"subject_qid": pl.String, "property_id": pl.String, "value_kind": pl.String,
                                      "amount": pl.Float64, "unit_qid": pl.String, "time": pl.String, "precision": pl.Int64})


def test_neighbours_sit_around_the_answer_at_every_rank():
    pool = np.arange(0, 100, 10)
    seeds = np.arange(400, dtype=np.uint64)
    keys = np.array(["p"] * 400, dtype=object)
    out, ok = neighbour_distractors(keys, np.full(400, 50), {"p": pool}, seeds)
    assert ok.all()
    below = (out < 50).sum(axis=1)  # the answer's rank among the four choices
    assert set(below.tolist()) == {0, 1, 2, 3}
    assert np.abs(np.bincount(below, minlength=4) / 400 - 0.25).max() < 0.07
    for row, r in zip(out, below):  # always the nearest neighbours on each side
        assert sorted(row.tolist()) == list(range(50 - 10 * r, 50, 10)) + list(range(60, 60 + 10 * (3 - r), 10))
    # the smallest value cannot have anything below it: those ranks are left to the grid method
    out, ok = neighbour_distractors(keys[:40], np.zeros(40, dtype=np.int64), {"p": pool}, seeds[:40])
    assert ok.any() and not ok.all() and (out[ok] > 0).all()


def test_number_distractors_are_other_subjects_values_on_the_answers_grid(bank):
    facts = _facts([(f"Q{i}", "P2044", "quantity", a, "http://www.wikidata.org/entity/Q11573", None, None)
                    for i, a in enumerate(ELEVATIONS)])
    pool = number_pool(facts.with_columns(value_kind=pl.lit("quantity")), ["P2044"])
    assert pool["unit_key"].unique().to_list() == ["Q11573"]
    real = {f"{round(a):,} m" for a in ELEVATIONS}
    middle = _numbers([8188.0] * 40)  # 5 higher and 8 lower values: every rank fits
    out = number_choices(middle, np.arange(40, dtype=np.uint64), bank.units, real=pool)
    assert out["reason"].null_count() == 40 and set(out["answer"].to_list()) == {"8,188 m"}
    for d in ("d1", "d2", "d3"):
        assert set(out[d].to_list()) <= real - {"8,188 m"}  # other subjects' values, rounded like the answer
    assert number_choices(middle, np.arange(40, dtype=np.uint64), bank.units, real=pool).equals(out)  # deterministic
    # the highest mountain has no higher neighbour: rows whose drawn rank needs one use the grid method
    top = number_choices(_numbers([8848.86] * 40), np.arange(40, dtype=np.uint64), bank.units, real=pool)
    all_real = top.filter(pl.col("d1").is_in(list(real)) & pl.col("d2").is_in(list(real)) & pl.col("d3").is_in(list(real)))
    assert 0 < all_real.height < 40 and top["reason"].null_count() == 40


def test_other_units_never_mix(bank):
    facts = _facts([(f"Q{i}", "P2044", "quantity", a, "Q3710", None, None) for i, a in enumerate(range(100, 2000, 100))])
    out = number_choices(_numbers([8848.86] * 10), np.arange(10, dtype=np.uint64), bank.units,
                         real=number_pool(facts, ["P2044"]))
    feet = {f"{a:,} m" for a in range(100, 2000, 100)}
    assert not set(out["d1"].to_list()) & feet


def test_choice_only_rules_are_at_chance_on_real_values(bank):
    rng = np.random.default_rng(3)
    amounts = np.round(np.exp(rng.normal(8, 2, 3000)))  # skewed like populations
    facts = _facts([(f"Q{i}", "P1082", "quantity", a, None, None, None) for i, a in enumerate(amounts)])
    pool = number_pool(facts, ["P1082"])
    df = _numbers(amounts[:1500].tolist(), pid="P1082", unit=None)
    out = number_choices(df, np.arange(1500, dtype=np.uint64) * 7919, bank.units, real=pool)
    ok = out.filter(pl.col("reason").is_null())
    values = np.array([[float(c.replace(",", "")) for c in row] for row in ok.select("answer", "d1", "d2", "d3").rows()])
    gap = np.abs(values - values.mean(axis=1, keepdims=True))
    best = gap == gap.min(axis=1, keepdims=True)
    hit = best[:, 0] / best.sum(axis=1)  # ties credited 1/k, as the bias report does
    assert len(values) > 1400
    assert abs(hit.mean() - 0.25) < 0.05  # closest to the mean picks the answer at chance


def test_date_distractors_are_real_dates_at_the_answers_precision():
    births = ["+1847-12-26T00:00:00Z", "+1844-11-25T00:00:00Z", "+1879-03-14T00:00:00Z", "+1867-11-07T00:00:00Z",
              "+1881-10-25T00:00:00Z", "+1832-12-15T00:00:00Z", "+1858-10-27T00:00:00Z", "+1900-00-00T00:00:00Z"]
    facts = _facts([(f"Q{i}", "P569", "time", None, None, t, 11 if i < 7 else 9) for i, t in enumerate(births)])
    pool = date_pool(facts, ["P569"])
    df = pl.DataFrame({"property_id": ["P569"] * 30, "time": [births[0]] * 30, "precision": [11] * 30,
                       "max_precision": [11] * 30, "window_years": [20] * 30})
    out = date_choices(df, np.arange(30, dtype=np.uint64), 2026, real=pool)
    assert out["reason"].null_count() == 30
    days = {"26 December 1847", "25 November 1844", "14 March 1879", "7 November 1867", "25 October 1881",
            "15 December 1832", "27 October 1858"}
    real_rows = out.filter(pl.col("d1").is_in(list(days)) & pl.col("d2").is_in(list(days)) & pl.col("d3").is_in(list(days)))
    assert real_rows.height >= 20  # a year-precision date never stands in for a day-precision answer
    years = date_choices(df.with_columns(max_precision=pl.lit(9)), np.arange(30, dtype=np.uint64), 2026, real=pool)
    assert set(years["d1"].to_list()) <= {"1844", "1879", "1867", "1881", "1832", "1858", "1900"} | set(
        str(y) for y in range(1827, 1868))


VOLTAGES = {"Q45": 230, "Q142": 230, "Q148": 220, "Q30": 120, "Q145": 230, "Q17": 100, "Q96": 127, "Q408": 230}  # mains voltage, V
PROMINENCES = [8848.86, 6962, 6144, 5885, 4695, 4020]  # Everest, Aconcagua, Denali, Kilimanjaro, Mont Blanc, K2; metres


def _value(text: str) -> float:
    return float(text.split(" ")[0].replace(",", ""))


def test_grid_distractors_stay_inside_the_real_range_of_the_property(bank):
    facts = _facts([(q, "P2884", "quantity", v, "Q25250", None, None) for q, v in VOLTAGES.items()])
    pool = number_pool(facts, ["P2884"])
    df = _numbers([230.0] * 200, pid="P2884", unit="Q25250").with_columns(decimals=pl.lit(0))
    out = number_choices(df, np.arange(200, dtype=np.uint64), bank.units, real=pool)
    assert out["reason"].null_count() == 200 and set(out["answer"].to_list()) == {"230 V"}
    offered = {_value(d) for c in ("d1", "d2", "d3") for d in out[c].to_list()}
    assert min(offered) >= 100 and max(offered) <= 230  # no 260 V or 280 V: no country uses them
    assert offered > {120, 220}  # the grid method fills in between the real values
    # one country's voltage only: no value inside the range but the answer itself
    alone = number_choices(df.head(5), np.arange(5, dtype=np.uint64), bank.units,
                           real=number_pool(facts.head(1), ["P2884"]))
    assert alone["reason"].to_list() == ["too_few_distractors"] * 5


def test_the_largest_known_value_has_no_distractor_above_it(bank):
    facts = _facts([(f"Q{i}", "P2660", "quantity", a, "Q11573", None, None) for i, a in enumerate(PROMINENCES)])
    pool = number_pool(facts, ["P2660"])
    for answer, text in ((8848.86, "8,849 m"), (6144.0, "6,144 m")):
        out = number_choices(_numbers([answer] * 100, pid="P2660"), np.arange(100, dtype=np.uint64), bank.units, real=pool)
        assert out["reason"].null_count() == 100 and set(out["answer"].to_list()) == {text}
        for c in ("d1", "d2", "d3"):
            values = [_value(d) for d in out[c].to_list()]
            assert max(values) <= 8849 and min(values) >= 4020  # never above Everest's prominence
            assert all("." not in d for d in out[c].to_list())  # the answer's precision: whole metres


def test_range_distractors_keep_the_answers_decimals(bank):
    facts = _facts([(f"Q{i}", "P1081", "quantity", v, None, None, None) for i, v in enumerate([0.83, 0.912, 0.881, 0.7, 0.55])])
    df = _numbers([0.83] * 100, pid="P1081", unit=None).with_columns(decimals=pl.lit(3))
    out = number_choices(df, np.arange(100, dtype=np.uint64), bank.units, real=number_pool(facts, ["P1081"]))
    assert set(out["answer"].to_list()) == {"0.830"} and out["reason"].null_count() == 100
    for c in ("d1", "d2", "d3"):
        assert all(len(d.split(".")[1]) == 3 and 0.55 <= float(d) <= 0.912 for d in out[c].to_list())


def test_date_distractors_stay_between_the_earliest_and_latest_real_dates():
    births = ["+1832-12-15T00:00:00Z", "+1844-11-25T00:00:00Z", "+1847-12-26T00:00:00Z", "+1858-10-27T00:00:00Z"]
    facts = _facts([(f"Q{i}", "P569", "time", None, None, t, 11) for i, t in enumerate(births)])
    pool = date_pool(facts, ["P569"])
    df = pl.DataFrame({"property_id": ["P569"] * 60, "time": [births[0]] * 60, "precision": [11] * 60,
                       "max_precision": [9] * 60, "window_years": [20] * 60})
    out = date_choices(df, np.arange(60, dtype=np.uint64), 2026, real=pool)
    assert out["reason"].null_count() == 60 and set(out["answer"].to_list()) == {"1832"}
    years = {int(d) for c in ("d1", "d2", "d3") for d in out[c].to_list()}
    assert min(years) >= 1832 and max(years) <= 1858  # the earliest birth: every distractor after it
    alone = date_choices(df.head(4), np.arange(4, dtype=np.uint64), 2026, real=date_pool(facts.head(1), ["P569"]))
    assert alone["reason"].to_list() == ["too_few_distractors"] * 4
