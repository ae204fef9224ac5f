"""Straightforward pure-Python balancing and splitting: the same algorithm, row by row.

Used by the tests: it must give the same tables and reports as the vectorized engine in
tasks/balance/balance.py and split.py.
Only the input read, the seeded keys (tasks/balance/keys.py) and the final row selection use
numpy or pyarrow; every decision is plain Python. The reports are written here field by field,
not with the engine's ``balance_report``/``split_report``, so the tests check them independently.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa

from reasonvqa.tasks.balance import keys
from reasonvqa.tasks.balance.balance import (
    BALANCE_REASONS,
    REMOVED,
    BalanceResult,
    check_columns,
)
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.split import (
    ANSWER_KIND,
    IMAGES,
    MERGED_KIND,
    NONE_KIND,
    SplitResult,
    check_images,
    check_split_input,
)


def reference_balance(pool: pa.Table, config: BalanceConfig, seed: int) -> BalanceResult:
    """Pure-Python twin of :func:`tasks.balance.balance.balance_questions`."""
    check_columns(pool)
    qids = pool.column("question_id").to_pylist()
    images = pool.column("image_id").to_pylist()
    props = pool.column("property_id").to_pylist()
    answers = pool.column("answer").to_pylist()
    n = pool.num_rows
    choices = pool.column("choices").to_pylist() if "choices" in pool.column_names else [["-"]] * n
    kinds = pool.column("kind").to_pylist() if "kind" in pool.column_names else [None] * n

    invalid: dict[int, str] = {}
    seen: set[str] = set()
    for row, (qid, image, prop, answer) in enumerate(zip(qids, images, props, answers)):
        if not qid:
            invalid[row] = "missing_question_id"
        elif qid in seen:
            invalid[row] = "duplicate_question_id"
        elif not image:
            invalid[row] = "missing_image_id"
        elif not prop:
            invalid[row] = "missing_property_id"
        elif not answer:
            invalid[row] = "missing_answer"
        elif kinds[row] in (None, "template") and not choices[row]:
            invalid[row] = "missing_choices"
        if qid is not None:
            seen.add(qid)

    valid = sorted((row for row in range(len(qids)) if row not in invalid), key=lambda r: qids[r])
    state = keys.salt(seed, "balance")
    key = dict(zip(valid, keys.keys_of(state, np.arange(len(valid))).tolist()))
    alive = set(valid)
    removed_in: dict[int, tuple[int, str]] = {}
    before = _group_counts(valid, props, answers)
    rounds: list[dict] = []
    converged = False
    for round_no in range(1, config.rounds + 1 if config.enabled else 1):
        current = _group_counts([r for r in valid if r in alive], props, answers)
        plan = {}  # (prop, answer) -> (excess, reason)
        for prop, counts in current.items():
            for answer, (target, reason) in group_targets(counts, config).items():
                if counts[answer] > target:
                    plan[(prop, answer)] = (counts[answer] - target, reason)
        if not plan:
            converged = True
            break
        image_count = Counter(images[r] for r in valid if r in alive)
        candidates: dict[tuple[str, str], list[int]] = defaultdict(list)
        for row in valid:
            if row in alive and (props[row], answers[row]) in plan:
                candidates[(props[row], answers[row])].append(row)
        dropped = []
        for pair, rows in candidates.items():
            excess, reason = plan[pair]
            rows.sort(key=lambda r: (-image_count[images[r]], key[r]))
            for row in rows[:excess]:
                dropped.append((row, reason))
        for row, reason in dropped:
            alive.discard(row)
            removed_in[row] = (round_no, reason)
        by_reason = Counter(reason for _, reason in dropped)
        rounds.append(
            {
                "round": round_no,
                "removed": len(dropped),
                "by_reason": {r: by_reason[r] for r in BALANCE_REASONS if by_reason[r]},
                "groups_touched": len({props[row] for row, _ in dropped}),
                "questions_after": len(alive),
            }
        )
    else:
        if config.enabled:
            current = _group_counts([r for r in valid if r in alive], props, answers)
            converged = all(
                counts[a] <= t for counts in current.values() for a, (t, _) in group_targets(counts, config).items()
            )

    kept_rows = [r for r in valid if r in alive]
    invalid_rows = [r for r in range(len(qids)) if r in invalid]
    removal_list = [(r, 0, invalid[r]) for r in invalid_rows] + [
        (r, removed_in[r][0], removed_in[r][1]) for r in valid if r not in alive
    ]
    removal_list.sort(key=lambda item: (qids[item[0]] is None, qids[item[0]] or "", item[0]))
    removed = pa.Table.from_pylist(
        [
            {"question_id": qids[r], "property_id": props[r], "answer": answers[r], "round": rnd, "reason": why}
            for r, rnd, why in removal_list
        ],
        schema=REMOVED,
    )
    images_before = {images[r] for r in valid}
    images_after = {images[r] for r in kept_rows}
    report = _balance_report(
        before,
        _group_counts(kept_rows, props, answers),
        config,
        seed,
        questions_in=len(qids),
        invalid=Counter(invalid.values()),
        rounds=rounds,
        converged=converged,
        images_before=len(images_before),
        images_emptied=len(images_before - images_after),
    )
    return BalanceResult(kept=pool.take(pa.array(kept_rows, type=pa.int64())), removed=removed, report=report)


def group_targets(counts: dict[str, int], config: BalanceConfig) -> dict[str, tuple[int, str]]:
    """Target count and binding reason for each answer of one group (one round)."""
    ranked = sorted(((a, c) for a, c in counts.items() if c > 0), key=lambda ac: (-ac[1], ac[0]))
    out = {}
    tail = sum(c for _, c in ranked)
    for rank, (answer, count) in enumerate(ranked):
        tail -= count
        next_count = ranked[rank + 1][1] if rank + 1 < len(ranked) else 0
        by_tail = math.floor(config.head_tail_bound * tail)
        by_ratio = math.floor(config.max_ratio * next_count)
        reason = "head_tail_bound" if by_tail <= by_ratio else "max_ratio"
        if rank < config.top_k and tail > 0:
            goal = min(count, max(min(by_tail, by_ratio), math.ceil(config.min_ratio * next_count)))
            out[answer] = (max(goal, count - math.ceil(config.max_round_fraction * count)), reason)
        else:
            out[answer] = (count, reason)
    return out


def _group_counts(rows: list[int], props: list, answers: list) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        group = out.setdefault(props[row], {})
        group[answers[row]] = group.get(answers[row], 0) + 1
    return out


def reference_split(questions: pa.Table, config: SplitConfig, seed: int) -> SplitResult:
    """Pure-Python twin of :func:`tasks.balance.split.split_images`."""
    check_split_input(questions)
    qids = questions.column("question_id").to_pylist()
    images = questions.column("image_id").to_pylist()
    answers = questions.column("answer").to_pylist()
    check_images(qids, images)
    n = len(qids)

    answer_count = Counter(a for a in answers if a is not None)
    pool = sorted(
        ((a, c) for a, c in answer_count.items() if c >= config.pool_min_share * n), key=lambda ac: (-ac[1], ac[0])
    )
    pool_set = {a for a, _ in pool}
    per_image: dict[str, Counter] = defaultdict(Counter)
    questions_of: Counter = Counter()
    for image, answer in zip(images, answers):
        questions_of[image] += 1
        if answer in pool_set:
            per_image[image][answer] += 1

    none, merged = (NONE_KIND, "", 0, ""), (MERGED_KIND, "", 0, "")
    initial, first_only = {}, {}
    for image in questions_of:
        top = sorted(per_image[image].items(), key=lambda ac: (-ac[1], ac[0]))[:2]
        first_only[image] = (ANSWER_KIND, top[0][0], 0, "") if top else none
        initial[image] = (ANSWER_KIND, top[0][0], 1, top[1][0]) if len(top) == 2 else first_only[image]
    initial_size = Counter(initial.values())
    level1 = {img: (first_only[img] if initial_size[lab] == 1 else lab) for img, lab in initial.items()}
    level1_size = Counter(level1.values())
    label = {img: (merged if level1_size[lab] == 1 else lab) for img, lab in level1.items()}

    state = keys.salt(seed, "split")
    images_sorted = sorted(questions_of)
    key = dict(zip(images_sorted, keys.keys_of(state, np.arange(len(images_sorted))).tolist()))
    layout = sorted(questions_of, key=lambda img: (label[img], -questions_of[img], key[img]))
    ratio = config.train_ratio
    is_train = {}
    for position, image in enumerate(layout):
        is_train[image] = math.floor(ratio * (position + 1) + 0.5) - math.floor(ratio * position + 0.5) == 1

    rows = sorted(range(n), key=lambda r: (qids[r] is None, qids[r] or "", r))
    categories: dict[tuple, list[int]] = {}
    for image in questions_of:
        totals = categories.setdefault(label[image], [0, 0, 0, 0])
        totals[0 if is_train[image] else 1] += 1
        totals[2 if is_train[image] else 3] += questions_of[image]
    no_pool = [img for img in questions_of if initial[img] == none]
    report = _split_report(
        config,
        seed,
        questions=n,
        images=len(questions_of),
        pool=pool,
        categories=categories,
        categories_initial=len(initial_size),
        merged_pair_to_single=sum(1 for img in questions_of if initial[img] != level1[img]),
        merged_into_shared=sum(1 for img in questions_of if label[img] == merged),
        no_pool_images=len(no_pool),
        no_pool_questions=sum(questions_of[img] for img in no_pool),
    )
    table = pa.Table.from_pylist(
        [
            {
                "image_id": image,
                "category": _category(label[image]),
                "questions": questions_of[image],
                "split": "train" if is_train[image] else "test",
            }
            for image in sorted(questions_of)
        ],
        schema=IMAGES,
    )
    return SplitResult(
        train=questions.take(pa.array([r for r in rows if is_train[images[r]]], type=pa.int64())),
        test=questions.take(pa.array([r for r in rows if not is_train[images[r]]], type=pa.int64())),
        images=table,
        report=report,
    )


def _entropy(counts: dict[str, int]) -> float:
    total = sum(counts.values())
    bits = sum(-(c / total) * math.log2(c / total) for c in sorted(counts.values()) if c > 0) if total else 0.0
    return round(bits + 0.0, 6)


def _top_share(counts: dict[str, int]) -> float | None:
    total = sum(counts.values())
    return round(max(counts.values()) / total, 6) if total else None


def _violations(counts: dict[str, int], config: BalanceConfig) -> list[dict]:
    """Top-k answers whose count exceeds head_tail_bound times the count of every answer ranked below."""
    ranked = sorted(((a, c) for a, c in counts.items() if c > 0), key=lambda ac: (-ac[1], ac[0]))
    out = []
    for rank, (answer, count) in enumerate(ranked[: config.top_k]):
        tail = sum(c for _, c in ranked[rank + 1:])
        if tail > 0 and count > config.head_tail_bound * tail:
            out.append({"answer": answer, "count": count, "tail": tail})
    return out


def _balance_report(before, after, config: BalanceConfig, seed: int, *, questions_in: int, invalid: Counter,
                    rounds: list[dict], converged: bool, images_before: int, images_emptied: int) -> dict:
    """The balancing report, field by field, without the engine's summary module."""
    groups = {}
    for prop in sorted(before):
        b, a = before[prop], after.get(prop, {})
        groups[prop] = {
            "questions_before": sum(b.values()),
            "questions_after": sum(a.values()),
            "removed": sum(b.values()) - sum(a.values()),
            "answers_before": len([c for c in b.values() if c]),
            "answers_after": len([c for c in a.values() if c]),
            "entropy_before": _entropy(b),
            "entropy_after": _entropy(a),
            "top_share_before": _top_share(b),
            "top_share_after": _top_share(a),
            "bound_violations": _violations(a, config),
        }
    kept = sum(g["questions_after"] for g in groups.values())
    by_reason = Counter({k: v for k, v in invalid.items() if v})
    for r in rounds:
        by_reason.update(r["by_reason"])
    single = [prop for prop, g in groups.items() if g["answers_before"] == 1]
    warnings = []
    if single:
        more = " ..." if len(single) > 10 else ""
        warnings.append(f"{len(single)} property group(s) have a single answer and cannot be balanced "
                        f"(kept as they are): {', '.join(single[:10])}{more}")
    if sum(invalid.values()):
        listed = ", ".join(f"{k}={invalid[k]}" for k in sorted(invalid) if invalid[k])
        warnings.append(f"removed invalid questions before balancing: {listed}")
    if config.enabled and not converged:
        warnings.append(f"balancing stopped after {len(rounds)} round(s) before reaching its fixed point")
    if questions_in > 0 and kept == 0:
        warnings.append("no question survived balancing")
    valid = questions_in - sum(invalid.values())
    return {
        "seed": seed,
        "config": config.model_dump(mode="json"),
        "questions_in": questions_in,
        "questions_kept": kept,
        "questions_removed": questions_in - kept,
        "removed_by_reason": {k: by_reason[k] for k in sorted(by_reason)},
        "balanced_away_share": round(sum(r["removed"] for r in rounds) / valid, 6) if valid else 0.0,
        "rounds": rounds,
        "rounds_run": len(rounds),
        "converged": converged,
        "groups": groups,
        "single_answer_groups": single,
        "groups_with_bound_violations": [prop for prop, g in groups.items() if g["bound_violations"]],
        "images_before": images_before,
        "images_emptied": images_emptied,
        "warnings": warnings,
    }


def _category(key: tuple) -> str:
    kind, first, has_second, second = key
    if kind == NONE_KIND:
        return "<no pool answer>"
    if kind == MERGED_KIND:
        return "<merged>"
    return f"{first} + {second}" if has_second else first


def _split_report(config: SplitConfig, seed: int, *, questions: int, images: int, pool: list[tuple[str, int]],
                  categories: dict[tuple, list[int]], categories_initial: int, merged_pair_to_single: int,
                  merged_into_shared: int, no_pool_images: int, no_pool_questions: int) -> dict:
    """The split report, field by field, without the engine's ``split_report``."""
    train_images, test_images, train_q, test_q = (sum(v[i] for v in categories.values()) for i in range(4))
    warnings = []
    if questions and not pool:
        warnings.append("no answer reaches pool_min_share: every image is in the '<no pool answer>' category")
    if no_pool_images:
        warnings.append(f"{no_pool_images} image(s) have no pool answer; they form the '<no pool answer>' category")
    if questions and 0 in (train_q, test_q):
        warnings.append(f"a split is empty (train={train_q}, test={test_q} questions): too few images to split")
    if questions == 0:
        warnings.append("no question to split")
    biggest = sorted(categories, key=lambda k: (-sum(categories[k][:2]), k))[:20]
    return {
        "seed": seed,
        "config": config.model_dump(mode="json"),
        "questions": questions,
        "images": images,
        "pool_answers": [{"answer": a, "count": c, "share": round(c / questions, 6)} for a, c in pool],
        "categories_initial": categories_initial,
        "categories_final": len(categories),
        "merged_pair_to_single_answer": merged_pair_to_single,
        "merged_into_shared": merged_into_shared,
        "images_without_pool_answer": {
            "images": no_pool_images,
            "questions": no_pool_questions,
            "handling": "grouped into the category '<no pool answer>' (or '<merged>' if alone) and split like any other",
        },
        "train": {"images": train_images, "questions": train_q},
        "test": {"images": test_images, "questions": test_q},
        "train_share_images": round(train_images / images, 6) if images else None,
        "train_share_questions": round(train_q / questions, 6) if questions else None,
        "largest_categories": [
            {"category": _category(k), "train_images": categories[k][0], "test_images": categories[k][1],
             "train_questions": categories[k][2], "test_questions": categories[k][3]}
            for k in biggest
        ],
        "warnings": warnings,
    }
