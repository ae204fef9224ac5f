"""Straightforward pure-Python balancing and splitting: the same algorithm, row by row.

Used by the tests (it must give the same tables and reports as the vectorized engine in
tasks/balance/balance.py and split.py) and by benchmarks/bench_balance_split.py as the baseline.
Only the input read, the seeded keys (tasks/balance/keys.py) and the final row selection use
numpy or pyarrow; every decision is plain Python.
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
    category_name,
    check_images,
    check_split_input,
    split_report,
)
from reasonvqa.tasks.balance.summary import balance_report


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
    report = balance_report(
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
    report = split_report(
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
                "category": category_name(label[image]),
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
