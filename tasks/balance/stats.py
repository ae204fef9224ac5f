"""Release statistics: counts, entropies, top answers and train/test divergence, as JSON and PNG.

``write_stats`` fills a release's ``stats/`` folder. Every file is deterministic: JSON with
sorted keys and rounded floats, PNGs rendered without timestamps (see tasks/balance/plots.py).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa.stage import write_json, write_parquet
from reasonvqa.tasks.balance import plots
from reasonvqa.tasks.balance.balance import BalanceResult
from reasonvqa.tasks.balance.bias import bias_report
from reasonvqa.tasks.balance.split import SplitResult
from reasonvqa.tasks.balance.summary import entropy_bits, js_divergence_bits, ranked

TOP_GROUPS = 6  # groups shown in the top-answer figures (the largest by pool size)
TOP_ANSWERS = 10
DIVERGENCE_GROUPS = 30

BREAKDOWNS = {  # stats key -> column
    "by_source": "image_source",
    "by_hop": "n_hop",
    "by_domain": "domains",
    "by_answer_category": "answer_category",
}


def write_stats(pool: pa.Table, balance: BalanceResult, split: SplitResult, out_dir: Path) -> dict[str, Path]:
    """Write stats JSON, reports, removals and plots into ``out_dir``; return {relative name: path}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # The balanced questions are exactly train + test (zero-copy concatenation; balance.kept may be None).
    balanced = pa.concat_tables([split.train, split.test])
    tables = {"pool": pool, "balanced": balanced, "train": split.train, "test": split.test}
    answers = {name: answer_counts(t) for name, t in tables.items()}
    largest = [g for g, _ in sorted(((g, sum(c.values())) for g, c in answers["pool"].items()), key=lambda gc: (-gc[1], gc[0]))]
    stats = {
        "counts": {name: table_counts(t) for name, t in tables.items()},
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
        "hop_mix": hop_mix(balance.report.get("hop_mix"), split),
        "split": {
            k: split.report[k]
            for k in ("train", "test", "train_share_images", "train_share_questions", "categories_final", "warnings")
        },
    }
    files = {
        "bias.json": out_dir / "bias.json",
        "stats.json": out_dir / "stats.json",
        "balance_report.json": out_dir / "balance_report.json",
        "split_report.json": out_dir / "split_report.json",
        "balance_removed.parquet": out_dir / "balance_removed.parquet",
    }
    write_json(stats, files["stats.json"])
    write_json(bias_report(split.train, split.test), files["bias.json"])
    write_json(balance.report, files["balance_report.json"])
    write_json(split.report, files["split_report.json"])
    write_parquet(balance.removed, files["balance_removed.parquet"])
    files.update(plots.write_plots(stats, largest, out_dir))
    files["SUMMARY.md"] = out_dir / "SUMMARY.md"
    files["SUMMARY.md"].write_text(summary_markdown(stats, files), encoding="utf-8")
    return dict(sorted(files.items()))


def hop_mix(report: dict | None, split: SplitResult) -> dict:
    """Target vs achieved share per hop count in the released questions (train + test)."""
    released: dict[str, int] = {}
    for table in (split.train, split.test):
        for h, n in table_counts(table).get("by_hop", {}).items():
            released[h] = released.get(h, 0) + n
    total = sum(released.values())
    return {
        "target": (report or {}).get("target", {}),
        "achieved": {h: round(n / total, 4) for h, n in sorted(released.items())} if total else {},
        "questions": dict(sorted(released.items())),
    }


def answer_counts(table: pa.Table) -> dict[str, dict[str, int]]:
    """{property_id: {answer: count}} over rows that have both."""
    counts = (
        table.select(["property_id", "answer"]).drop_null().group_by(["property_id", "answer"]).aggregate([([], "count_all")])
    )
    out: dict[str, dict[str, int]] = {}
    for prop, answer, n in zip(*(counts.column(i).to_pylist() for i in range(3))):
        out.setdefault(prop, {})[answer] = n
    return {g: dict(sorted(c.items())) for g, c in sorted(out.items())}


def table_counts(table: pa.Table) -> dict:
    """Questions, images and per-column breakdowns of one table (columns it lacks are skipped).

    A list column (domains) counts each value of each row; a row with no value counts as "<none>".
    """
    out: dict = {"questions": table.num_rows}
    if "image_id" in table.column_names:
        out["images"] = pc.count_distinct(table["image_id"]).as_py()
    for key, column in BREAKDOWNS.items():
        if column not in table.column_names:
            continue
        values = table[column]
        empty = 0
        if pa.types.is_list(values.type):
            empty = pc.sum(pc.fill_null(pc.equal(pc.list_value_length(values), 0), True)).as_py() or 0
            values = pc.list_flatten(values)
        counts = {
            "<none>" if v is None else str(v): n
            for v, n in ((e["values"], e["counts"]) for e in pc.value_counts(values).to_pylist())
        }
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
