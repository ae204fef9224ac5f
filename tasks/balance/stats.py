"""Release statistics: counts, entropies, top answers and train/test divergence, as JSON and PNG.

``write_stats`` fills a release's ``stats/`` folder. Every file is deterministic: JSON with
sorted keys and rounded floats, PNGs rendered without timestamps (see tasks/balance/plots.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa.stage import write_json, write_parquet
from reasonvqa.tasks.balance import codes, plots
from reasonvqa.tasks.balance.balance import BalanceResult
from reasonvqa.tasks.balance.bias import BIAS_COLUMNS, bias_report, bias_report_parts
from reasonvqa.tasks.balance.codes import take_rows
from reasonvqa.tasks.balance.split import SplitResult
from reasonvqa.tasks.balance.summary import entropy_bits, js_divergence_bits, ranked
from reasonvqa.tasks.release.writer import Rows, TableRows

TOP_GROUPS = 6  # groups shown in the top-answer figures (the largest by pool size)
TOP_ANSWERS = 10
DIVERGENCE_GROUPS = 30

BREAKDOWNS = {  # stats key -> column
    "by_source": "image_source",
    "by_hop": "n_hop",
    "by_domain": "domains",
    "by_answer_category": "answer_category",
}


def write_stats(pool: Rows, balance: BalanceResult, split: SplitResult, out_dir: Path) -> dict[str, Path]:
    """Write stats JSON, reports, removals and plots into ``out_dir``; return {relative name: path}.

    ``pool``, ``split.train`` and ``split.test`` are tables or ``TableRows`` views (from
    ``pipeline.plan_release``); counts come from integer codes of each column, computed once per
    underlying table. From ``partitioned.plan_partitioned`` they are ``SpilledRows``: counts and the
    bias report add up over slices of the spill parts (same bytes, memory independent of the pool).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    partwise = hasattr(pool, "part_views")  # a partitioned.SpilledRows: counted one spill part at a time
    with ThreadPoolExecutor(max_workers=2) as threads:
        # the bias report (Arrow gathers, polars) releases the GIL: it runs beside the counts and the
        # plots (numpy, then matplotlib in Python), so both cores work
        bias = threads.submit(_bias_partwise, pool) if partwise else threads.submit(_bias, split.train, split.test)
        removed = threads.submit(write_parquet, balance.removed, out_dir / "balance_removed.parquet")
        stats, largest = _stats_partwise(pool, balance, split) if partwise else _stats(pool, balance, split)
        files = {
            "bias.json": out_dir / "bias.json",
            "stats.json": out_dir / "stats.json",
            "balance_report.json": out_dir / "balance_report.json",
            "split_report.json": out_dir / "split_report.json",
            "balance_removed.parquet": out_dir / "balance_removed.parquet",
        }
        write_json(stats, files["stats.json"])
        write_json(balance.report, files["balance_report.json"])
        write_json(split.report, files["split_report.json"])
        files.update(plots.write_plots(stats, largest, out_dir))
        write_json(bias.result(), files["bias.json"])
        removed.result()
    files["SUMMARY.md"] = out_dir / "SUMMARY.md"
    files["SUMMARY.md"].write_text(summary_markdown(stats, files), encoding="utf-8")
    return dict(sorted(files.items()))


def _bias(train: Rows, test: Rows) -> dict:
    """``bias_report`` over slices of BIAS_ROWS rows of train, then of test: the gathered columns and
    polars frames of one slice at a time instead of whole train and test (same report)."""
    def parts():
        empty = _slices(train, 0)[0]
        yield from ((part, empty) for part in _slices(train, BIAS_ROWS))
        empty = _slices(test, 0)[0]
        yield from ((empty, part) for part in _slices(test, BIAS_ROWS))

    return bias_report_parts(parts)


BIAS_ROWS = 524_288


def _slices(table: Rows, size: int) -> list[Rows]:
    """``table`` in slices of ``size`` rows (at least one, maybe empty; ``size`` 0: one empty slice); views stay
    views, gathered when the bias report selects its columns."""
    starts = range(0, table.num_rows, size) if size else []
    if isinstance(table, pa.Table):
        return [table.slice(s, size) for s in starts] or [table.slice(0, 0)]
    return [table.with_rows(table.rows[s:s + size]) for s in starts] or [table.with_rows(table.rows[:0])]


def _bias_partwise(pool) -> dict:
    """``bias_report`` over the spill parts of a partitioned pool (question texts bucketed on disk)."""
    def parts():
        for table, _, train_rows, test_rows in pool.part_views(BIAS_COLUMNS):
            yield take_rows(table, train_rows), take_rows(table, test_rows)

    return bias_report_parts(parts, spill_dir=pool.scratch / "bias_questions")


def _stats(pool: Rows, balance: BalanceResult, split: SplitResult) -> tuple[dict, list[str]]:
    """The stats.json content and the property groups by pool size (largest first)."""
    tables = {"pool": pool, "balanced": _balanced(split), "train": split.train, "test": split.test}
    coded = ColumnCodes()
    answers = {name: answer_counts(t, coded) for name, t in tables.items()}
    counts = {name: table_counts(t, coded) for name, t in tables.items()}
    del coded
    return _stats_of(answers, counts, balance, split)


def _stats_partwise(pool, balance: BalanceResult, split: SplitResult) -> tuple[dict, list[str]]:
    """``_stats`` of a partitioned pool: counts added up part by part, images counted on their integer codes."""
    names = ("pool", "balanced", "train", "test")
    answers: dict[str, dict] = {name: {} for name in names}
    counts: dict[str, dict] = {name: {} for name in names}
    seen = {name: np.zeros(pool.images, dtype=bool) for name in names}
    for table, image, train_rows, test_rows in pool.part_views(COUNT_COLUMNS):
        coded = ColumnCodes()
        views = {"pool": np.arange(table.num_rows), "balanced": np.sort(np.concatenate([train_rows, test_rows])),
                 "train": train_rows, "test": test_rows}
        for name, rows in views.items():
            _add(answers[name], answer_counts(TableRows(table, rows), coded))
            _add(counts[name], table_counts(TableRows(table, rows), coded, images=False))
            picked = image[rows]
            seen[name][picked[picked >= 0]] = True
    for name in names:
        counts[name]["images"] = int(np.count_nonzero(seen[name]))
        counts[name] = _sorted(counts[name])
    return _stats_of({name: _sorted(a) for name, a in answers.items()}, counts, balance, split)


def _add(into: dict, more: dict) -> None:
    """Add the counts of ``more`` (nested dicts of ints) into ``into``."""
    for key, value in more.items():
        if isinstance(value, dict):
            _add(into.setdefault(key, {}), value)
        else:
            into[key] = into.get(key, 0) + value


def _sorted(counts: dict) -> dict:
    """Nested dicts with their keys in sorted order, as the one-table counts come."""
    return {k: _sorted(v) if isinstance(v, dict) else v for k, v in sorted(counts.items())}


def _stats_of(answers: dict, counts: dict, balance: BalanceResult, split: SplitResult) -> tuple[dict, list[str]]:
    """The stats.json content from the answer counts and table counts of pool, balanced, train and test."""
    largest = [g for g, _ in sorted(((g, sum(c.values())) for g, c in answers["pool"].items()), key=lambda gc: (-gc[1], gc[0]))]
    stats = {
        "counts": counts,
        "entropy_bits": {
            g: {"before": entropy_bits(answers["pool"][g]), "after": entropy_bits(answers["balanced"].get(g, {}))}
            for g in sorted(answers["pool"])
        },
        "top_answers": top_answers(answers, largest[:TOP_GROUPS]),
        "train_test_divergence": divergence(answers["train"], answers["test"]),
        "balancing": {
            k: balance.report[k]
            for k in ("questions_in", "questions_kept", "removed_by_reason", "balanced_away_share", "rounds", "converged", "warnings")
        },
        "hop_mix": hop_mix(balance.report.get("hop_mix"), counts["train"], counts["test"]),
        "split": {
            k: split.report[k]
            for k in ("train", "test", "train_share_images", "train_share_questions", "categories_final", "warnings")
        },
    }
    return stats, largest


COUNT_COLUMNS = ["image_id", "property_id", "answer", *BREAKDOWNS.values()]  # what the counts read


def _balanced(split: SplitResult) -> Rows:
    """The balanced questions: exactly train + test (zero-copy; views of one table stay a view)."""
    train, test = split.train, split.test
    if isinstance(train, TableRows) and isinstance(test, TableRows) and train.table is test.table:
        return train.with_rows(np.concatenate([train.rows, test.rows]))
    if not isinstance(train, pa.Table) and not isinstance(test, pa.Table) and train.table is test.table:
        return TableRows(train.table, np.concatenate([train.rows, test.rows]))
    return pa.concat_tables([_columns(train, None), _columns(test, None)])


def _columns(table: Rows, columns: list[str] | None) -> pa.Table:
    """``table`` (or only ``columns`` of it) as a materialized table; a view (``TableRows``,
    ``partitioned.SpilledRows``) gathers them."""
    if not isinstance(table, pa.Table):
        return table.select(columns or table.table.column_names)
    return table if columns is None else table.select(columns)


def _base(table: Rows) -> tuple[pa.Table, np.ndarray]:
    """(underlying table, its row numbers) of a table or a view (``.table``, ``.rows``)."""
    if not isinstance(table, pa.Table):
        return table.table, table.rows
    return table, np.arange(table.num_rows)


class ColumnCodes:
    """Dense codes of the columns of the tables behind views, computed once per table and column."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, str], tuple] = {}
        self._keep: list[pa.Table] = []  # holds the tables so their ids stay unique

    def of(self, table: pa.Table, column: str) -> tuple[np.ndarray, list]:
        """(code per row, -1 for null; the distinct values in sorted order as Python objects)."""
        key = (id(table), column)
        if key not in self._cache:
            self._keep.append(table)
            values, distinct = codes.dense_codes(table[column])
            self._cache[key] = (values.astype(np.int32), distinct.to_pylist())
        return self._cache[key]

    def distinct_count(self, table: pa.Table, column: str, rows: np.ndarray) -> int:
        """Distinct non-null values of ``column`` among ``rows`` (hash codes: no sort, no Python values)."""
        key = (id(table), column + "#")
        if key not in self._cache:
            self._keep.append(table)
            encoded = pc.dictionary_encode(codes.combined(table[column]))
            self._cache[key] = pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int32)
        picked = self._cache[key][rows]
        return int(np.count_nonzero(np.bincount(picked[picked >= 0])))

    def of_list(self, table: pa.Table, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
        """For a list column: (per row start and length in the flat values, flat value codes, distinct values)."""
        key = (id(table), column + "[]")
        if key not in self._cache:
            self._keep.append(table)
            array = codes.combined(table[column])
            values, distinct = codes.dense_codes(array.values)
            offsets = array.offsets.to_numpy().astype(np.int64)
            if array.null_count:  # a null list holds no values, whatever its offsets say
                null = array.is_null().to_numpy(zero_copy_only=False)
                lengths = np.where(null, 0, np.diff(offsets))
                starts = offsets[:-1]
                self._cache[key] = (starts, lengths, values, distinct.to_pylist())
            else:
                self._cache[key] = (offsets[:-1], np.diff(offsets), values, distinct.to_pylist())
        return self._cache[key]

    def pairs(self, table: pa.Table) -> tuple[np.ndarray, list[str], list[str]]:
        """(dense (property_id, answer) code per row, -1 if either is null; property and answer per code)."""
        key = (id(table), "(property_id, answer)")
        if key not in self._cache:
            prop, props = self.of(table, "property_id")
            answer, answers = self.of(table, "answer")
            valid = (prop >= 0) & (answer >= 0)
            combined = prop.astype(np.int64) * (len(answers) + 1) + answer
            unique, inverse = np.unique(combined[valid], return_inverse=True)  # sort-based (returns the inverse)
            pair = np.full(len(prop), -1, dtype=np.int64)
            pair[valid] = inverse
            groups, answer_of = np.divmod(unique, len(answers) + 1)
            self._cache[key] = (pair, [props[g] for g in groups.tolist()], [answers[a] for a in answer_of.tolist()])
        return self._cache[key]


def hop_mix(report: dict | None, train_counts: dict, test_counts: dict) -> dict:
    """Target vs achieved share per hop count in the released questions (train + test), from their counts."""
    released: dict[str, int] = {}
    for counts in (train_counts, test_counts):
        for h, n in counts.get("by_hop", {}).items():
            released[h] = released.get(h, 0) + n
    total = sum(released.values())
    return {
        "target": (report or {}).get("target", {}),
        "achieved": {h: round(n / total, 4) for h, n in sorted(released.items())} if total else {},
        "questions": dict(sorted(released.items())),
    }


def answer_counts(table: Rows, coded: ColumnCodes | None = None) -> dict[str, dict[str, int]]:
    """{property_id: {answer: count}} over rows that have both."""
    base, rows = _base(table)
    pair, props, answers = (coded or ColumnCodes()).pairs(base)
    picked = pair[rows]
    counts = np.bincount(picked[picked >= 0], minlength=len(props))
    out: dict[str, dict[str, int]] = {}
    for code in np.flatnonzero(counts).tolist():
        out.setdefault(props[code], {})[answers[code]] = int(counts[code])
    return {g: dict(sorted(c.items())) for g, c in sorted(out.items())}


def table_counts(table: Rows, coded: ColumnCodes | None = None, images: bool = True) -> dict:
    """Questions, images (unless not ``images``) and per-column breakdowns of one table (columns it lacks are skipped).

    A list column (domains) counts each value of each row; a row with no value counts as "<none>".
    """
    coded = coded or ColumnCodes()
    base, rows = _base(table)
    out: dict = {"questions": len(rows)}
    if images and "image_id" in base.column_names:
        out["images"] = coded.distinct_count(base, "image_id", rows)
    for key, column in BREAKDOWNS.items():
        if column not in base.column_names:
            continue
        if pa.types.is_list(base.schema.field(column).type):
            starts, lengths, flat, distinct = coded.of_list(base, column)
            starts, lengths = starts[rows], lengths[rows]
            values = flat[codes.flat_positions(starts, lengths)]
            empty = int(np.count_nonzero(lengths == 0))  # a null list has no values either
        else:
            values, distinct = coded.of(base, column)
            values, empty = values[rows], 0
        found = np.bincount(values[values >= 0], minlength=len(distinct))
        counts = {str(distinct[c]): int(found[c]) for c in np.flatnonzero(found).tolist()}
        empty += int(np.count_nonzero(values < 0))
        if empty:
            counts["<none>"] = counts.get("<none>", 0) + empty
        out[key] = dict(sorted(counts.items()))
    return out


def top_answers(answers: dict[str, dict[str, dict[str, int]]], groups: list[str]) -> dict:
    """Per group: the top answers before balancing with their counts in every table."""
    out = {}
    for g in groups:
        before = ranked(answers["pool"].get(g, {}))[:TOP_ANSWERS]
        after = ranked(answers["balanced"].get(g, {}))[:TOP_ANSWERS]
        out[g] = {
            "before_order": [
                {"answer": a, **{name: answers[name].get(g, {}).get(a, 0) for name in answers}} for a, _ in before
            ],
            "after_order": [
                {"answer": a, **{name: answers[name].get(g, {}).get(a, 0) for name in answers}} for a, _ in after
            ],
            "questions": {name: sum(answers[name].get(g, {}).values()) for name in answers},
        }
    return out


def divergence(train: dict[str, dict[str, int]], test: dict[str, dict[str, int]]) -> dict:
    """Jensen-Shannon divergence (bits) of train vs test answers, overall and per group."""
    overall_train: dict[str, int] = {}
    overall_test: dict[str, int] = {}
    for source, sink in ((train, overall_train), (test, overall_test)):
        for counts in source.values():
            for a, n in counts.items():
                sink[a] = sink.get(a, 0) + n
    groups = sorted(set(train) | set(test))
    per_group = {g: js_divergence_bits(train.get(g, {}), test.get(g, {})) for g in groups}
    present = [v for v in per_group.values() if v is not None]
    return {
        "overall": js_divergence_bits(overall_train, overall_test),
        "mean_over_groups": round(sum(present) / len(present), 6) if present else None,
        "groups_only_in_one_split": [g for g, v in per_group.items() if v is None],
        "per_group": per_group,
    }


def summary_markdown(stats: dict, files: dict[str, Path]) -> str:
    """A short human-readable page that links every figure."""
    c = stats["counts"]
    bal = stats["balancing"]
    lines = [
        "# Release statistics",
        "",
        "| table | questions | images |",
        "|---|---:|---:|",
        *[f"| {name} | {c[name]['questions']} | {c[name].get('images', '')} |" for name in ("pool", "balanced", "train", "test")],
        "",
        f"Balancing removed {bal['questions_in'] - bal['questions_kept']} of {bal['questions_in']} pool questions "
        f"({bal['balanced_away_share']:.1%} of the valid ones by the balancing rounds); converged: {bal['converged']}.",
        f"Train/test Jensen-Shannon divergence of answers: overall {stats['train_test_divergence']['overall']}, "
        f"mean over groups {stats['train_test_divergence']['mean_over_groups']}.",
        "",
        *[f"- [{name}]({name})" for name in sorted(files) if name.endswith(".png")],
        "",
        "Details: stats.json, balance_report.json (what each round removed), split_report.json, "
        "balance_removed.parquet (every removed question with round and reason).",
        "",
    ]
    warnings = stats["balancing"]["warnings"] + stats["split"]["warnings"]
    if warnings:
        lines += ["## Warnings", "", *[f"- {w}" for w in warnings], ""]
    return "\n".join(lines)
