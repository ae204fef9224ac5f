"""Number answers and distractors in the answer's unit.

Rendering: the template's ``decimals`` or, when automatic, about three significant digits but
never more decimals than the value has (8848.86 -> "8,849", 1.55 -> "1.55", 11 -> "11"); a thousands
separator unless the template turns it off; the unit's symbol from units.yaml, else its English
label from the facts; unitless quantities (Wikidata unit "1"/Q199) render bare.

Distractors (``method="exchangeable"``, the default): see exchangeable.py. The grid is the
answer's rendered precision, so distractors round like the answer (330 -> 270, 410; 8,849 ->
8,213, 9,402): no trailing-digit or rounding tell. The span is 2 x ``spread`` x |answer|
(at least 6 steps); distractors of a positive answer stay positive.

Real values first (``method="exchangeable"`` with the index's number pool): where the property
has enough other real amounts in the answer's unit, the distractors are the answer's neighbours
among them, rounded to the answer's grid, with the answer at a uniform rank (real_values.py);
the grid method above covers the other rows, inside the range of the property's real amounts in
that unit (their smallest and largest, on the answer's grid): no distractor exceeds the largest
known value ("topographic prominence" never above Everest's, "mains voltage" never 280 V where
no country uses more than 240 V). A property whose real amounts leave fewer than three grid
points besides the answer gets ``too_few_distractors``.

Distractors (``method="paper"``, ReasonVQA 3.2.2 for reproduction): a window around the answer,
answer + k * step for three distinct k in [-5, 5] \\ {0}, where step is ``spread`` x
|answer| rounded down to 1, 2 or 5 x 10^n and never finer than the rendered precision, so every
distractor renders differently from the answer and from each other. Distractors keep the
answer's sign (a positive answer gets positive distractors, a negative one negative ones), since
"-1" and "1" are the same once punctuation is ignored.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.bank import UnitFormat
from reasonvqa.tasks.questions.choice_frame import choice_frame
from reasonvqa.tasks.questions.exchangeable import exchangeable_distractors
from reasonvqa.tasks.questions.hashing import sample3
from reasonvqa.tasks.questions.real_values import neighbour_distractors, pool_on_grid, unit_key_expr

MAX_K = 5
_UNITLESS = ("1", "Q199")
_ENTITY_PREFIX = "http://www.wikidata.org/entity/"


def number_choices(
    df: pl.DataFrame, seeds: np.ndarray, units: dict[str, UnitFormat], method: str = "exchangeable",
    real: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Columns answer, reason, d1, d2, d3 for rows with ``amount``, ``unit_qid``, ``unit_label``,
    ``decimals`` (null = automatic), ``spread`` and ``thousands`` (and ``property_id`` when ``real``,
    the index's number pool, is given)."""
    unit_table = pl.DataFrame(
        {"unit_key": list(units), "symbol": [u.symbol for u in units.values()], "space": [u.space for u in units.values()]},
        schema={"unit_key": pl.String, "symbol": pl.String, "space": pl.Boolean},
    )
    frame = df.select("amount", "unit_label", "decimals", "spread", "thousands",
                      unit_key=pl.col("unit_qid").str.strip_prefix(_ENTITY_PREFIX))
    frame = frame.join(unit_table, on="unit_key", how="left", maintain_order="left")
    unitless = pl.col("unit_key").is_null() | pl.col("unit_key").is_in(_UNITLESS)
    label = pl.col("unit_label").str.strip_chars()
    suffix = (
        pl.when(unitless).then(pl.lit(""))
        .when(pl.col("symbol").is_not_null()).then(pl.when(pl.col("space")).then(pl.lit(" ")).otherwise(pl.lit("")) + pl.col("symbol"))
        .when(label.str.len_chars() > 0).then(" " + label)
    )
    frame = frame.with_columns(suffix=suffix)

    amount = frame["amount"].fill_null(0.0).to_numpy().astype(np.float64)
    reason = np.full(df.height, None, dtype=object)
    reason[frame["suffix"].is_null().to_numpy()] = "no_english_label"
    too_big = ~np.isfinite(amount) | (np.abs(amount) >= 1e15)
    reason[too_big] = "number_out_of_range"
    reason[frame["amount"].is_null().to_numpy()] = "empty_answer"
    amount = np.where(too_big, 0.0, amount)

    decimals = frame["decimals"].fill_null(-1).to_numpy().astype(np.int64)
    auto = decimals < 0
    decimals = np.where(auto, auto_decimals(amount), decimals)
    scale = 10.0 ** decimals
    answer = np.round(amount * scale) / scale
    tiny = (answer == 0) & (amount != 0)
    reason[tiny & (reason == None)] = "number_out_of_range"  # noqa: E711

    if method == "exchangeable":
        bounds = _real_range(df, answer, real) if real is not None else None
        distractors = _exchangeable(answer, decimals, frame["spread"].to_numpy(), seeds, reason, bounds)
        if real is not None and len(answer):
            neighbours, found = _real_neighbours(df, answer, decimals, seeds, real)
            distractors = np.where(found[:, None], neighbours, distractors)
            reason[found & (reason == "too_few_distractors")] = None
    else:
        distractors = _paper_window(answer, scale, frame["spread"].to_numpy(), seeds)
    values = np.concatenate([answer, distractors[:, 0], distractors[:, 1], distractors[:, 2]])
    text = format_numbers(values, np.tile(decimals, 4), np.tile(frame["thousands"].to_numpy(), 4))
    suffix_all = pl.concat([frame["suffix"].fill_null("")] * 4)
    text = text + suffix_all
    return choice_frame(text, reason)


def rounding_grid(answer: np.ndarray, decimals: np.ndarray) -> np.ndarray:
    """The step the rendered answer is rounded to: 10^-decimals, or for whole numbers 10^(its
    trailing zeros) (330 -> 10, 2,000,000 -> 1,000,000, 0 -> 1)."""
    whole = np.round(np.abs(answer)).astype(np.int64)
    zeros = np.zeros(len(answer), dtype=np.int64)
    for t in range(1, 16):
        zeros = np.where((whole > 0) & (whole % (10**t) == 0), t, zeros)
    return np.where(decimals > 0, 10.0 ** -decimals, 10.0**zeros)


def _exchangeable(
    answer: np.ndarray, decimals: np.ndarray, spread: np.ndarray, seeds: np.ndarray, reason: np.ndarray,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Grid distractors (exchangeable.py); ``bounds`` (smallest, largest allowed amount per row)
    keeps them inside the real values' range, rounded to the answer's grid."""
    grid = rounding_grid(answer, decimals)
    steps = np.round(answer / grid).astype(np.int64)  # signed
    span = np.maximum(np.round(2 * spread * np.abs(steps)), 6).astype(np.int64)
    # a positive answer keeps positive distractors, a negative one negative ones ("-1" and "1" read alike)
    lowest = np.where(steps > 0, 1, np.where(steps < 0, -(10**12), 0))
    highest = np.where(steps < 0, -1, 10**12)
    if bounds is not None:
        lowest = np.maximum(lowest, np.round(bounds[0] / grid).astype(np.int64))
        highest = np.minimum(highest, np.round(bounds[1] / grid).astype(np.int64))
    room_below = np.maximum(steps - lowest, 0)
    room_above = np.maximum(highest - steps, 0)
    out, ok = exchangeable_distractors(steps, span, room_below, room_above, seeds, stream=21)
    reason[~ok & (reason == None)] = "too_few_distractors"  # noqa: E711
    return out * grid[:, None]


def _real_range(df: pl.DataFrame, answer: np.ndarray, real: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row the smallest and largest real amount of its property in its unit (the answer included)."""
    ranges = real.group_by("property_id", "unit_key").agg(low=pl.col("amount").min(), high=pl.col("amount").max())
    rows = df.select("property_id", unit_key=unit_key_expr(pl.col("unit_qid")))
    rows = rows.join(ranges, on=["property_id", "unit_key"], how="left", maintain_order="left")
    low = rows["low"].fill_null(np.inf).to_numpy().astype(np.float64)
    high = rows["high"].fill_null(-np.inf).to_numpy().astype(np.float64)
    return np.minimum(low, answer), np.maximum(high, answer)


def _real_neighbours(
    df: pl.DataFrame, answer: np.ndarray, decimals: np.ndarray, seeds: np.ndarray, real: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """Real amounts of the same property and unit next to the answer, on its grid (real_values.py)."""
    grid = rounding_grid(answer, decimals)
    keys = df.select(
        pl.concat_str([pl.col("property_id"), unit_key_expr(pl.col("unit_qid")), pl.Series(grid).cast(pl.String)], separator="\x1f")
    ).to_series().to_numpy().astype(object)
    amounts = _grouped_amounts(real)
    pools = {}
    for key in set(keys.tolist()):
        group_key, g = key.rsplit("\x1f", 1)
        if group_key in amounts:
            pools[key] = pool_on_grid(amounts[group_key], float(g))
    steps = np.round(answer / grid).astype(np.int64)
    out, ok = neighbour_distractors(keys, steps, pools, seeds)
    ok &= (np.sign(out) == np.sign(steps)[:, None]).all(axis=1)  # "-1" and "1" read alike once punctuation goes
    return out * grid[:, None], ok


def _grouped_amounts(real: pl.DataFrame) -> dict[str, np.ndarray]:
    grouped = real.group_by("property_id", "unit_key", maintain_order=True).agg("amount")
    return {f"{p}\x1f{u}": np.asarray(a, dtype=np.float64) for p, u, a in grouped.iter_rows()}


def _paper_window(answer: np.ndarray, scale: np.ndarray, spread: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    grid = 1.0 / scale
    step = np.maximum(nice_floor(np.abs(answer) * spread), grid)
    # distractors keep the answer's sign ("-1" and "1" are equal once punctuation is ignored):
    # k moves away from zero freely and towards it only while the magnitude stays above zero
    magnitude = np.abs(answer)
    k_min = np.where(magnitude > 0, np.maximum(-MAX_K, -np.ceil(magnitude / step - 1e-9) + 1), 1).astype(np.int64)
    m = MAX_K - k_min + (k_min > 0)  # size of [k_min, MAX_K] without 0
    q = sample3(m, seeds, stream=21) + k_min[:, None]
    k = q + ((q >= 0) & (k_min[:, None] <= 0))
    sign = np.where(answer < 0, -1.0, 1.0)
    return np.round((answer[:, None] + sign[:, None] * k * step[:, None]) * scale[:, None]) / scale[:, None]


def auto_decimals(amount: np.ndarray) -> np.ndarray:
    """About three significant digits, at most 6 decimals, never more than the value has."""
    magnitude = np.floor(np.log10(np.where(amount == 0, 1.0, np.abs(amount))))
    wanted = np.clip(2 - magnitude, 0, 6).astype(np.int64)
    has = np.full(amount.shape, 6, dtype=np.int64)
    for d in range(6, -1, -1):
        scaled = amount * 10.0**d
        exact = np.abs(scaled - np.round(scaled)) <= 1e-6 * np.maximum(1.0, np.abs(scaled))
        has = np.where(exact, d, has)
    return np.minimum(wanted, has)


def nice_floor(x: np.ndarray) -> np.ndarray:
    """Largest 1, 2 or 5 x 10^n not above x (0 for x <= 0)."""
    safe = np.where(x > 0, x, 1.0)
    power = 10.0 ** np.floor(np.log10(safe))
    lead = safe / power
    nice = np.where(lead >= 5, 5.0, np.where(lead >= 2, 2.0, 1.0)) * power
    return np.where(x > 0, nice, 0.0)


def format_numbers(values: np.ndarray, decimals: np.ndarray, thousands: np.ndarray) -> pl.Series:
    """Fixed-point text with per-value decimals and optional thousands separators.

    One ``str.format`` per value, grouped by format: measured faster here than polars string
    expressions (a reversed-string regex, or digit-group arithmetic) and than a numpy digit matrix.
    """
    values = np.asarray(values, dtype=np.float64) + 0.0  # no "-0"
    out = np.empty(len(values), dtype=object)
    keys = decimals.astype(np.int64) * 2 + thousands.astype(np.int64)
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        spec = ("{:,.%df}" if key % 2 else "{:.%df}") % (key // 2)
        text = list(map(spec.format, values[rows].tolist()))
        out[rows] = text
    return pl.Series("number", out.tolist(), dtype=pl.String)
