"""Release statistics: counts, entropies, top answers and train/test divergence, as JSON and PNG.

``write_stats`` fills a release's ``stats/`` folder. Every file is deterministic: JSON with
sorted keys and rounded floats, PNGs rendered without timestamps (see tasks/balance/plots.py).
"""

from __future__ import annotations

from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Iterator, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import codes
from reasonvqa.codes import take_rows
from reasonvqa.row_views import Rows, TableRows
from reasonvqa.stage import write_json, write_parquet
from reasonvqa.tasks.balance import plots
from reasonvqa.tasks.balance.balance import BalanceResult
from reasonvqa.tasks.balance.bias import bias_columns, bias_report_parts
from reasonvqa.tasks.balance.groups import with_group_keys
from reasonvqa.tasks.balance.split import SplitResult
from reasonvqa.tasks.balance.summary import entropy_bits, js_divergence_bits, ranked

TOP_GROUPS = 6  # groups shown in the top-answer figures (the largest by pool size)
TOP_ANSWERS = 10
DIVERGENCE_GROUPS = 30

TableOrView = Union[pa.Table, TableRows]  # the unpartitioned path's pool, train and test (``plan_release``)

BREAKDOWNS = {  # stats key -> column
    "by_source": "image_source",
    "by_hop": "n_hop",
    "by_domain": "domains",
    "by_answer_category": "answer_category",
}


def write_stats(pool: Rows, balance: BalanceResult, split: SplitResult, out_dir: Path) -> dict[str, Path]:
    """Write stats JSON, reports, removals and plots into ``out_dir``; return {relative name: path}.

    ``pool``, ``split.train`` and ``split.test`` are tables or ``TableRows`` views (from
    ``pipeline.plan_release``); counts come from integer codes of each column of the underlying table,
    counted once for pool, balanced, train and test (rows labelled removed / train / test). From ``partitioned.plan_partitioned`` they are ``SpilledRows``: counts and the
    bias report add up over slices of the spill parts (same bytes, memory independent of the pool).
    """
    with ThreadPoolExecutor(max_workers=1) as figures:
        files, rendered = start_stats(pool, balance, split, out_dir, figures)
        rendered.result()
    return files


def start_stats(pool: Rows, balance: BalanceResult, split: SplitResult, out_dir: Path,
                figures: Executor) -> tuple[dict[str, Path], Future]:
    """``write_stats`` but for the PNG figures, which are rendered on ``figures``: ({relative name: path},
    the figures' future: its ``result()`` returns when they are written, or raises what rendering raised).

    ``balance.pool_codes`` (the decision's codes, used by the counts) is dropped once they are counted.
    The figures (matplotlib: about 1 CPU s, mostly Python under the GIL, whatever the pool size) need only
    the counts, so a caller can render them beside the release's Parquet writes, whose gathers and encoding
    release the GIL (``write_release(..., stats_ready=future.result)``), instead of before them.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    partwise = hasattr(pool, "part_views")  # a partitioned.SpilledRows: counted one spill part at a time
    with ThreadPoolExecutor(max_workers=2) as threads:
        # the bias report (Arrow gathers, polars) releases the GIL: it runs beside the counts (numpy), so
        # both cores work
        label = None if partwise else _view_labels(split.train, split.test)  # one array for the bias report and counts
        bias = threads.submit(_bias_partwise, pool) if partwise else threads.submit(_bias, split.train, split.test, label)
        removed = threads.submit(write_parquet, balance.removed, out_dir / "balance_removed.parquet")
        stats, largest = _stats_partwise(pool, balance, split) if partwise else _stats(pool, balance, split, label)
        del label
        balance.pool_codes = None  # the decision's codes are counted: not held through the release's writes
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
        rendered = figures.submit(plots.write_plots, stats, largest, out_dir)
        files.update({name: out_dir / name for name in plots.FIGURES})
        write_json(bias.result(), files["bias.json"])
        removed.result()
    files["SUMMARY.md"] = out_dir / "SUMMARY.md"
    files["SUMMARY.md"].write_text(summary_markdown(stats, files), encoding="utf-8")
    return dict(sorted(files.items())), rendered


def _bias(train: TableOrView, test: TableOrView, label: np.ndarray | None = None) -> dict:
    """``bias_report`` over parts of at most BIAS_ROWS rows: the gathered columns and polars frames of one part at
    a time instead of whole train and test (same report: it does not depend on parts or row order).

    Views of one table (``plan_release``): the table's rows in table order, BIAS_ROWS / 2 at a time (up to three
    parts are alive at once: the one in use, the next and the one being gathered), filtered into train and test (sequential reads; Arrow's take on a many-chunk table
    costs about the whole column per call), each part gathered on a thread while the report works on the one
    before (Arrow releases the GIL).
    Other tables: slices of train, then of test. ``label``: ``_view_labels(train, test)`` when the caller has it."""
    label = _view_labels(train, test) if label is None else label
    if label is not None:
        table = train.table.select(bias_columns(train.table.column_names))

        def gather(start: int) -> tuple[pa.Table, pa.Table]:
            part, mark = table.slice(start, step), label[start:start + step]
            return part.filter(pa.array(mark == 1)), part.filter(pa.array(mark == 2))

        step = max(BIAS_ROWS // 2, 1)
        return bias_report_parts(lambda: _one_ahead(gather, list(range(0, table.num_rows, step)) or [0]))

    def parts():
        empty = _slices(train, 0)[0]
        yield from ((part, empty) for part in _slices(train, BIAS_ROWS))
        empty = _slices(test, 0)[0]
        yield from ((empty, part) for part in _slices(test, BIAS_ROWS))

    return bias_report_parts(parts)


def _one_ahead(work, items: list) -> Iterator:
    """``work(item)`` of each item in order, the next one computed on a thread while the caller uses this one."""
    if not items:
        return
    with ThreadPoolExecutor(max_workers=1) as thread:
        pending = thread.submit(work, items[0])
        for item in items[1:]:
            done, pending = pending.result(), thread.submit(work, item)
            yield done
        yield pending.result()


BIAS_ROWS = 524_288


def _slices(table: TableOrView, size: int) -> list[TableOrView]:
    """``table`` in slices of ``size`` rows (at least one, maybe empty; ``size`` 0: one empty slice); views stay
    views, gathered when the bias report selects its columns."""
    starts = range(0, table.num_rows, size) if size else []
    if isinstance(table, pa.Table):
        return [table.slice(s, size) for s in starts] or [table.slice(0, 0)]
    return [table.with_rows(table.rows[s:s + size]) for s in starts] or [table.with_rows(table.rows[:0])]


def _bias_partwise(pool) -> dict:
    """``bias_report`` over the spill parts of a partitioned pool (question texts bucketed on disk)."""
    def parts():
        for table, _, train_rows, test_rows in pool.part_views(bias_columns(pool.spill.schema.names)):
            yield take_rows(table, train_rows), take_rows(table, test_rows)

    return bias_report_parts(parts, spill_dir=pool.scratch / "bias_questions")


def _stats(pool: TableOrView, balance: BalanceResult, split: SplitResult,
           label: np.ndarray | None = None) -> tuple[dict, list[str]]:
    """The stats.json content and the property groups by pool size (largest first); ``label``: ``_view_labels`` of
    train and test when the caller has it."""
    one_table = _one_table(pool, split.train, split.test)
    table, label, subsets = _labelled(pool, split.train, split.test, one_table, label)
    # the decision's codes are per row of the pool table: usable when the rows counted are that very table's
    known = balance.pool_codes if one_table and balance.pool_codes_of is pool.shared else None
    answers, counts = labelled_counts(table, label, subsets, known=known)
    del table, label
    return _stats_of(answers, counts, balance, split)


def _stats_partwise(pool, balance: BalanceResult, split: SplitResult) -> tuple[dict, list[str]]:
    """``_stats`` of a partitioned pool: counts added up part by part, images counted on their integer codes."""
    answers: dict[str, dict] = {name: {} for name in SUBSETS}
    counts: dict[str, dict] = {name: {} for name in SUBSETS}
    seen = {name: np.zeros(pool.images, dtype=bool) for name in SUBSETS}
    for table, image, train_rows, test_rows in pool.part_views(COUNT_COLUMNS):
        label = _labels(table.num_rows, train_rows, test_rows)
        part_answers, part_counts = labelled_counts(table, label, SUBSETS, images=False)
        for name, labels in SUBSETS.items():
            _add(answers[name], part_answers[name])
            _add(counts[name], part_counts[name])
            picked = image[np.isin(label, labels)]
            seen[name][picked[picked >= 0]] = True
    for name in SUBSETS:
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
            for k in ("train", "test", "train_share_images", "train_share_questions", "categories_final", "groups",
                      "warnings") if k in split.report
        },
    }
    return stats, largest


# what the counts read; the kind columns give grounded and verified answers their balancing group (groups.py)
COUNT_COLUMNS = ["image_id", "property_id", "answer", *BREAKDOWNS.values(), "kind", "task_type", "is_hallucination",
                 "template_ids"]
LABELS = 3  # a row of the counted table is labelled 0 (removed), 1 (train) or 2 (test)
SUBSETS = {"pool": (0, 1, 2), "balanced": (1, 2), "train": (1,), "test": (2,)}  # name -> its labels
CONCATENATED = {"pool": (0,), "balanced": (1, 2), "train": (1,), "test": (2,)}  # labels of pool + train + test rows


def _labels(n: int, train_rows: np.ndarray, test_rows: np.ndarray) -> np.ndarray:
    """Per row of a table of ``n`` rows: 1 for ``train_rows``, 2 for ``test_rows``, 0 for the others."""
    label = np.zeros(n, dtype=np.int8)
    label[train_rows] = 1
    label[test_rows] = 2
    if np.count_nonzero(label) != len(train_rows) + len(test_rows):
        raise AssertionError("train and test rows overlap")  # each subset's counts would be wrong
    return label


def _view_labels(train: TableOrView, test: TableOrView) -> np.ndarray | None:
    """``_labels`` of train and test views of one table, per row of that table; None for other inputs."""
    if isinstance(train, TableRows) and isinstance(test, TableRows) and train.table is test.table:
        return _labels(train.table.num_rows, train.rows, test.rows)
    return None


def _labelled(pool: TableOrView, train: TableOrView, test: TableOrView, one_table: bool,
              label: np.ndarray | None = None) -> tuple[pa.Table, np.ndarray, dict]:
    """(table, label per row, subsets) to count pool, balanced, train and test in one pass per column.

    Views of one table whose pool view holds every row once (``plan_release``) are counted on that table,
    labelled removed / train / test; other inputs are concatenated (pool, then train, then test) and each
    part labelled as its own table. ``one_table``: ``_one_table(pool, train, test)``; ``label``: its train and test
    views' ``_view_labels``, if at hand."""
    if one_table:
        label = _view_labels(train, test) if label is None else label
        assert label is not None, "views of one table have labels"
        return pool.table.select(_present(pool.table)), label, SUBSETS
    columns = [c for c in COUNT_COLUMNS if all(c in (t.table if isinstance(t, TableRows) else t).column_names
                                               for t in (pool, train, test))]
    tables = [t.select(columns) for t in (pool, train, test)]  # a view gathers its rows
    label = np.repeat(np.arange(LABELS, dtype=np.int8), [t.num_rows for t in tables])
    # permissive: a split may come with other string widths or nullability than the pool (counts are by value)
    return pa.concat_tables(tables, promote_options="permissive"), label, CONCATENATED


def _one_table(pool: TableOrView, train: TableOrView, test: TableOrView) -> bool:
    """True for views of one table whose pool view holds every row of it once (``plan_release``)."""
    if not (all(isinstance(t, TableRows) for t in (pool, train, test)) and pool.table is train.table is test.table):
        return False
    n = pool.table.num_rows
    return len(pool.rows) == n and np.count_nonzero(np.bincount(pool.rows, minlength=n)) == n


def _present(table: pa.Table) -> list[str]:
    """The COUNT_COLUMNS ``table`` has (a column it lacks is not counted)."""
    return [c for c in COUNT_COLUMNS if c in table.column_names]


def labelled_counts(table: pa.Table, label: np.ndarray, subsets: dict[str, tuple[int, ...]],
                    images: bool = True, known: Known | None = None) -> tuple[dict, dict]:
    """({subset: answer counts}, {subset: table counts}) of the rows of ``table`` whose label is among the subset's.

    Each column is dictionary-encoded once (hash codes; the outputs are sorted by value afterwards) and
    counted per label with one ``bincount``: no gather of rows and no second pass per subset.
    Answer counts: {property_id: {answer: count}} over rows that have both. Table counts: questions, images
    (unless not ``images``) and per-column breakdowns (columns the table lacks are skipped); a list column
    (domains) counts each value of each row, a row with no value counts as "<none>". ``known``: codes of some
    columns per row of ``table`` already at hand (the decision's, ``BalanceResult.pool_codes``), used instead of
    encoding those columns again.
    """
    per_label = np.bincount(label, minlength=LABELS)
    counts: dict[str, dict] = {name: {"questions": int(per_label[list(labels)].sum())} for name, labels in subsets.items()}
    if images and "image_id" in table.column_names:
        image, distinct = _codes_of(table, "image_id", known, names=False)
        present = _by_label(image, label, len(distinct))[1:] > 0
        for name, labels in subsets.items():
            counts[name]["images"] = int(np.count_nonzero(present[:, list(labels)].any(axis=1)))
    for key, column in BREAKDOWNS.items():
        if column not in table.column_names:
            continue
        if pa.types.is_list(table.schema.field(column).type):
            array = codes.combined(table[column])
            lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy()
            values, distinct = _hash_codes(pc.list_flatten(array))
            found = _by_label(values, np.repeat(label, lengths), len(distinct))
            found[0] += np.bincount(label[lengths == 0], minlength=LABELS)  # no value: "<none>", as a null value
        else:
            values, distinct = _hash_codes(table[column])
            found = _by_label(values, label, len(distinct))
        for name, labels in subsets.items():
            counts[name][key] = _named(found[:, list(labels)].sum(axis=1), [str(v) for v in distinct])
    return _answer_counts(table, label, subsets, known), counts


def _answer_counts(table: pa.Table, label: np.ndarray, subsets: dict[str, tuple[int, ...]],
                   known: Known | None = None) -> dict:
    """{subset: {group: {answer: count}}} over rows that have both: the group is the property_id, or for a kind
    without one its balancing group (``groups.with_group_keys``: kind, task type, form, hallucination)."""
    prop, props = _hash_codes(with_group_keys(table)["property_id"])
    answer, answers = _codes_of(table, "answer", known)
    valid = (prop >= 0) & (answer >= 0)
    encoded = pc.dictionary_encode(pa.array(prop * len(answers) + answer, mask=~valid))
    del prop, answer, valid
    group, answer_of = (a.tolist() for a in np.divmod(encoded.dictionary.to_numpy(), max(len(answers), 1)))
    pair = _by_label(pc.fill_null(encoded.indices, -1).to_numpy(), label, len(encoded.dictionary))[1:]
    out = {}
    for name, labels in subsets.items():
        found = pair[:, list(labels)].sum(axis=1)
        nested: dict[str, dict[str, int]] = {}
        for code in np.flatnonzero(found).tolist():
            nested.setdefault(props[group[code]], {})[answers[answer_of[code]]] = int(found[code])
        out[name] = {g: dict(sorted(c.items())) for g, c in sorted(nested.items())}
    return out


def _hash_codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """(code per row, -1 for null; the distinct values as Python objects, in order of first occurrence)."""
    encoded = pc.dictionary_encode(codes.combined(column))
    return pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64), encoded.dictionary.to_pylist()


Known = dict[str, tuple[np.ndarray, pa.Array]]  # column -> (code per row, -1 for null; the distinct values)


def _codes_of(table: pa.Table, name: str, known: Known | None, names: bool = True) -> tuple[np.ndarray, list | range]:
    """``_hash_codes`` of the column ``name``, or its codes from ``known`` when it has the column (there the
    distinct values are sorted, not in first-occurrence order: the counts are sorted by value afterwards); the
    distinct values as a list only when ``names``, else a range of their number (image ids are only counted)."""
    if not known or name not in known:
        return _hash_codes(table[name])
    code, values = known[name]  # int32, counted as they are (``_by_label`` widens while it combines)
    return code, values.to_pylist() if names else range(len(values))


def _by_label(values: np.ndarray, label: np.ndarray, distinct: int) -> np.ndarray:
    """Rows per (code + 1, label): row 0 counts the nulls (code -1), row c + 1 the code c."""
    key = values.astype(np.int64)  # one int64 copy, combined in place (codes may be int32)
    key += 1
    key *= LABELS
    key += label
    return np.bincount(key, minlength=(distinct + 1) * LABELS).reshape(-1, LABELS)


def _named(found: np.ndarray, names: list[str]) -> dict[str, int]:
    """{name: count} of the codes counted in ``found`` (row 0: nulls, as "<none>"), sorted by name."""
    counts = {names[c - 1]: int(found[c]) for c in np.flatnonzero(found[1:]) + 1}
    if found[0]:
        counts["<none>"] = counts.get("<none>", 0) + int(found[0])
    return dict(sorted(counts.items()))


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


def removed_line(balancing: dict) -> str:
    """What left the pool, each share of the pool's questions (the rounds' share of the valid ones apart)."""
    pool, kept = balancing["questions_in"], balancing["questions_kept"]
    share = (lambda n: f"{n / pool:.1%}") if pool else (lambda n: "n/a")  # noqa: E731
    reasons = sorted(balancing.get("removed_by_reason", {}).items(), key=lambda rn: (-rn[1], rn[0]))
    by_reason = "; by reason: " + ", ".join(f"{r} {n} ({share(n)})" for r, n in reasons) if reasons else ""
    return (f"Removed {pool - kept} of {pool} pool questions ({share(pool - kept)}){by_reason}. The balancing rounds "
            f"(head_tail_bound, max_ratio) removed {balancing['balanced_away_share']:.1%} of the valid questions; "
            f"converged: {balancing['converged']}.")


def group_lines(groups: dict | None) -> list[str]:
    """The image groups of the split (each a landmark, scene or episode kept in one split); none without groups."""
    if not groups:
        return []
    several = groups["with_several_images"]
    return [f"Split by image group (GLDv2 landmark, nuScenes scene, DROID episode; an image alone otherwise): "
            f"{groups['groups']} groups, {groups['train']} in train and {groups['test']} in test, none in both; "
            f"{several['groups']} hold several images ({several['train']} train, {several['test']} test)."]


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
        removed_line(bal),
        *group_lines(stats["split"].get("groups")),
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
