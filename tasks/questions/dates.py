"""Date answers and distractors at the fact's precision.

A Wikidata time ("+1889-03-31T00:00:00Z", precision 9 year / 10 month / 11 day) renders at
min(fact precision, template max_precision): "1889", "March 1889", "31 March 1889"; years before
the common era as "44 BC" (Wikidata writes 44 BC as -0044; internally years are astronomical,
1 BC = 0, so no year 0 is ever rendered). Coarser precisions (decade, century, ...) are rejected:
the question would have no single right answer at year level.

Distractors are whole steps of the rendered precision (years, months or days) within
``window_years`` of the answer, never after ``latest_year`` unless the answer itself is later,
three distinct values drawn from the question's seed: by default placed so that the answer's
rank among the four is uniform and the set is exchangeable (exchangeable.py); with
``method="paper"`` uniformly in the window around the answer (ReasonVQA 3.2.2). Where the property has enough other real dates (at least the answer's rendered precision), the
exchangeable distractors are the answer's neighbours among them at that precision, the answer at
a uniform rank (real_values.py); the window covers the other rows, inside the range of those real
dates (never before the earliest nor after the latest known date of the property at that
precision; a property with a single known date gets ``too_few_distractors``). Day arithmetic uses the proleptic Gregorian
calendar (Wikidata's Julian-calendar dates keep their written day; only the distractors are
computed in the Gregorian system). A day its month lacks in that calendar ("30 February", or a
Julian 29 February 1700) is rejected as ``unparsable_date`` rather than rolled into March.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from reasonvqa.tasks.questions.choice_frame import choice_frame
from reasonvqa.tasks.questions.exchangeable import exchangeable_distractors
from reasonvqa.tasks.questions.hashing import sample3
from reasonvqa.tasks.questions.real_values import neighbour_distractors

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
_UNITS_PER_YEAR = {9: 1, 10: 12, 11: 365}
_TIME = r"^([+-]?)(\d{1,12})-(\d{1,2})-(\d{1,2})"


def days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (astronomical years), vectorized."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * np.where(m > 2, m - 3, m + 9) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of ``days_from_civil``."""
    z = z + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    y = yoe + era * 400 + (m <= 2)
    return y, m, d


def date_choices(
    df: pl.DataFrame, seeds: np.ndarray, latest_year: int, method: str = "exchangeable", real: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Columns answer, reason, d1, d2, d3 for rows with ``time``, ``precision``, ``max_precision``,
    ``window_years`` (and ``property_id`` when ``real``, the index's date pool, is given)."""
    parts = df.select(
        g=pl.col("time").fill_null("").str.extract_groups(_TIME),
        precision=pl.when(pl.col("precision").is_not_null()).then(
            pl.min_horizontal(pl.col("precision").cast(pl.Int64), pl.col("max_precision").cast(pl.Int64))
        ),
        window=pl.col("window_years").cast(pl.Int64),
    ).unnest("g")
    sign, year, month, day = (parts.get_column(c) for c in parts.columns[:4])
    year_n = year.cast(pl.Int64, strict=False).fill_null(0).to_numpy()
    month_n = month.cast(pl.Int64, strict=False).fill_null(0).to_numpy()
    day_n = day.cast(pl.Int64, strict=False).fill_null(0).to_numpy()
    prec = parts["precision"].fill_null(0).to_numpy()
    window = parts["window"].to_numpy()
    astro = np.where(sign.fill_null("").to_numpy() == "-", 1 - year_n, year_n)

    reason = np.full(df.height, None, dtype=object)
    month_bad = (prec >= 10) & ((month_n < 1) | (month_n > 12))
    # a day its month lacks ("30 February") would otherwise roll over into the next month
    _, _, rolled = civil_from_days(days_from_civil(astro, np.clip(month_n, 1, 12), np.clip(day_n, 1, 31)))
    day_bad = (prec == 11) & ((day_n < 1) | (day_n > 31) | (rolled != day_n))
    reason[(prec < 9)] = "date_too_coarse"
    reason[parts["precision"].is_null().to_numpy()] = "date_without_precision"
    reason[year.is_null().to_numpy() | month_bad | day_bad] = "unparsable_date"
    reason[df["time"].is_null().to_numpy()] = "empty_answer"
    ok = reason == None  # noqa: E711 (elementwise on an object array)
    prec = np.where(ok, prec, 9)
    month_n = np.clip(month_n, 1, 12)
    day_n = np.clip(day_n, 1, 31)

    value = np.select(
        [prec == 9, prec == 10],
        [astro, astro * 12 + month_n - 1],
        days_from_civil(astro, month_n, day_n),
    )
    per_year = np.select([prec == 9, prec == 10], [1, 12], 365)
    latest = np.select(
        [prec == 9, prec == 10],
        [latest_year, latest_year * 12 + 11],
        days_from_civil(np.array([latest_year]), np.array([12]), np.array([31]))[0],
    )
    span = window * per_year
    if method == "exchangeable":
        # all four choices within one window: every rank fits unless the latest year bounds it
        room_below = span
        room_above = np.where(value > latest, span, np.minimum(span, latest - value))
        if real is not None and len(value):
            pools = _real_pools(df["property_id"], prec, ok, real)
            earliest, last = _real_range(pools, df["property_id"], prec, ok, value)
            room_below = np.maximum(np.minimum(room_below, value - earliest), 0)
            room_above = np.maximum(np.minimum(room_above, last - value), 0)
        q, fits = exchangeable_distractors(value, span, room_below, room_above, seeds, stream=11)
        if real is not None and len(value):
            neighbours, found = _real_neighbours(df["property_id"], value, prec, ok, seeds, pools)
            q = np.where(found[:, None], neighbours, q)
            fits = fits | found
        reason[ok & ~fits] = "too_few_distractors"
        rendered = render(np.concatenate([value, q[:, 0], q[:, 1], q[:, 2]]), np.tile(prec, 4))
        return choice_frame(rendered, reason)
    lo = value - span
    hi = np.where(value > latest, value + span, np.minimum(value + span, latest))
    m = hi - lo  # candidates in [lo, hi] except the answer itself
    short = ok & (m < 3)
    reason[short] = "too_few_distractors"
    m = np.where(m >= 3, m, 3)
    q = sample3(m, seeds, stream=11) + lo[:, None]
    q = q + (q >= value[:, None])

    rendered = render(np.concatenate([value, q[:, 0], q[:, 1], q[:, 2]]), np.tile(prec, 4))
    return choice_frame(rendered, reason)


def _keys(properties: pl.Series, prec: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The real-date pool key of each row (property and rendered precision), None for rejected rows."""
    keys = (properties + "\x1f" + pl.Series(prec).cast(pl.String)).to_numpy().astype(object)
    keys[~ok] = None
    return keys


def _real_pools(properties: pl.Series, prec: np.ndarray, ok: np.ndarray, real: pl.DataFrame) -> dict[str, np.ndarray]:
    """Per (property, precision) key the property's real dates at least that precise, as sorted
    distinct internal values at that precision."""
    pools = {}
    for key in {k for k in _keys(properties, prec, ok).tolist() if k is not None}:
        pid, p = key.rsplit("\x1f", 1)
        times = real.filter(pl.col("property_id") == pid, pl.col("precision") >= int(p))
        pools[key] = np.unique(_internal(times["time"], int(p)))
    return pools


def _real_range(
    pools: dict[str, np.ndarray], properties: pl.Series, prec: np.ndarray, ok: np.ndarray, value: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row the earliest and latest real date of its pool (the answer included)."""
    keys = _keys(properties, prec, ok)
    names, inverse = np.unique(np.where(keys == None, "", keys).astype(str), return_inverse=True)  # noqa: E711
    spans = [pools.get(k) for k in names.tolist()]
    low = np.array([v[0] if v is not None and len(v) else np.iinfo(np.int64).max for v in spans], dtype=np.int64)
    high = np.array([v[-1] if v is not None and len(v) else np.iinfo(np.int64).min for v in spans], dtype=np.int64)
    return np.minimum(low[inverse], value), np.maximum(high[inverse], value)


def _real_neighbours(
    properties: pl.Series, value: np.ndarray, prec: np.ndarray, ok: np.ndarray, seeds: np.ndarray,
    pools: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Real dates of the same property next to the answer at its rendered precision (real_values.py)."""
    return neighbour_distractors(_keys(properties, prec, ok), value, pools, seeds)


def _internal(times: pl.Series, precision: int) -> np.ndarray:
    """Wikidata times as whole years, months since year 0 or days since 1970 (astronomical years);
    a time that does not parse, or names a day its month lacks, is left out."""
    parts = times.fill_null("").str.extract_groups(_TIME).struct.unnest()
    sign, year, month, day = (parts.get_column(c) for c in parts.columns[:4])
    y = year.cast(pl.Int64, strict=False).to_numpy()
    good = ~np.isnan(y.astype(np.float64)) if y.dtype.kind == "f" else np.ones(len(y), dtype=bool)
    y = np.nan_to_num(y.astype(np.float64)).astype(np.int64)
    m = month.cast(pl.Int64, strict=False).fill_null(0).to_numpy()
    d = day.cast(pl.Int64, strict=False).fill_null(0).to_numpy()
    astro = np.where(sign.fill_null("").to_numpy() == "-", 1 - y, y)
    if precision >= 10:
        good &= (m >= 1) & (m <= 12)
    mc, dc = np.clip(m, 1, 12), np.clip(d, 1, 31)
    days = days_from_civil(astro, mc, dc)
    if precision == 11:
        good &= civil_from_days(days)[2] == d
    value = astro if precision == 9 else astro * 12 + mc - 1 if precision == 10 else days
    return value[good]


def render(values: np.ndarray, precision: np.ndarray) -> pl.Series:
    """Render internal values (years, months since year 0, or days since 1970) at their precision."""
    y = np.select([precision == 9, precision == 10], [values, np.floor_divide(values, 12)], 0)
    mo = np.where(precision == 10, np.mod(values, 12) + 1, 1)
    dy, dm, dd = civil_from_days(np.where(precision == 11, values, 0))
    y = np.where(precision == 11, dy, y)
    mo = np.where(precision == 11, dm, mo)
    frame = pl.DataFrame({"y": y, "m": mo, "d": np.where(precision == 11, dd, 1), "p": precision})
    year = pl.when(pl.col("y") > 0).then(pl.col("y").cast(pl.String)).otherwise((1 - pl.col("y")).cast(pl.String) + " BC")
    month = pl.col("m").replace_strict(dict(enumerate(MONTHS, start=1)), return_dtype=pl.String)
    text = (
        pl.when(pl.col("p") == 9).then(year)
        .when(pl.col("p") == 10).then(month + " " + year)
        .otherwise(pl.col("d").cast(pl.String) + " " + month + " " + year)
    )
    return frame.select(text.alias("date")).to_series()
