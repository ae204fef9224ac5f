"""Balance then split a pool holding one copy of it in memory (for builds, re-splits, benchmarks)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Callable, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import codes
from reasonvqa.image_groups import domains_of
from reasonvqa.splitmix import mix64
from reasonvqa.tasks.balance import keys
from reasonvqa.tasks.balance.groups import FORM, with_group_keys
from reasonvqa.tasks.balance.hallucination_share import apply_hallucination_share
from reasonvqa.tasks.balance.balance import (NO_CHOICES, BalanceResult, Removal, add_removal, balance_questions,
                                              gather_removed, no_choices)
from reasonvqa.row_views import TableRows
from reasonvqa.rows import row_numbers
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.split import SplitResult, split_images


@dataclass
class BalancedSplit:
    """From ``balance_and_split``: ``pool`` is the input pool's rows reordered as
    train | test | removed, each by question_id; ``split.train`` and ``split.test`` are zero-copy
    slices of ``pool`` and ``balance.kept`` is the slice train + test, so the whole result holds
    one copy of the pool's data.

    From ``plan_release``: ``pool`` is ``TableRows`` of the input pool in question_id order,
    ``split.train`` / ``split.test`` are ``TableRows`` of it (each by question_id) and
    ``balance.kept`` is None: nothing is copied until the writer gathers each file's rows.
    """

    pool: pa.Table | TableRows
    balance: BalanceResult
    split: SplitResult


SeenCheck = Callable[[np.ndarray, np.ndarray], np.ndarray]
# what ``decide`` reads of the pool (kind, task_type and is_hallucination where the pool has them), and the
# ``balance.no_choices`` flags of its rows (from its choices column, or a key table's NO_CHOICES column)
DECISION_COLUMNS = ("question_id", "image_id", "property_id", "answer", "n_hop", "kind", "task_type", "is_hallucination",
                    "absence_basis", "template_ids", FORM, NO_CHOICES)


def decide(pool: pa.Table, balance: BalanceConfig, split: SplitConfig, seed: int,
           seen_in_train: SeenCheck | None = None, keep_codes: tuple[str, ...] = (),
           groups: pa.Table | None = None) -> tuple[BalanceResult, SplitResult]:
    """Balance, hop mix, split and the seen-in-train check as row numbers into ``pool``; nothing
    is materialized (``kept``, ``train``, ``test`` are None). ``pool`` needs the columns
    question_id, image_id, property_id, answer, n_hop (hop mix), kind, task_type and
    is_hallucination where the pool has other kinds than templates (their balancing group and
    hallucination share: groups.py, hallucination_share.py) and, unless ``seen_in_train`` (test
    rows, train rows -> mask of the test rows whose (question, answer) pair is in train) is
    given, question; choices (or a ``balance.NO_CHOICES`` column) to remove multiple-choice rows without
    choices. The release keeps each row's own property_id (null for kinds without one). ``keep_codes``: columns
    whose codes (untouched by the group keys: not property_id) go to ``BalanceResult.pool_codes``. ``groups``
    (``image_groups.GROUPS``) keeps each image group in one split."""
    if unknown := set(keep_codes) - (set(DECISION_COLUMNS) - {"property_id"}):
        # property_id: the group keys rewrite it for kinds without one (not the pool's values)
        raise ValueError(f"decide keeps no codes of {sorted(unknown)}")
    keyed = with_group_keys(pool.select([c for c in DECISION_COLUMNS if c in pool.column_names]))
    flags = no_choices(pool)
    if flags is not None and NO_CHOICES not in keyed.column_names:
        keyed = keyed.append_column(NO_CHOICES, flags)
    # a second thread hashes the columns (and the pairs for seen-in-train) while this one sorts the ids
    with ThreadPoolExecutor(max_workers=1) as background:
        coded = codes.ColumnCodes(keyed, background)  # each column's codes once, for all the steps
        coded.prefetch(("image_id", "property_id", "answer"))
        if split.drop_test_pairs_seen_in_train and seen_in_train is None:
            # runs after the prefetched answer codes on the same single thread, which it waits for: the
            # prefetch must stay queued first, or this task would wait on work queued behind it
            pair_keys = background.submit(_pair_keys, pool, coded)
            seen_in_train = lambda test, train: _seen_by_keys(pool, pair_keys.result(), test, train)  # noqa: E731
        balanced = balance_questions(keyed, balance, seed, materialize=False, coded=coded, gather=False)
        _apply_hop_mix(keyed, balanced, balance.hop_shares, seed, coded)
        apply_hallucination_share(keyed, balanced, balance.hallucination_share, seed, partial(_add_removed, coded=coded),
                                  domains=_row_domains(keyed, coded, groups))
        result = split_images(keyed, split, seed, rows=balanced.kept_rows, materialize=False, coded=coded, groups=groups)
        assert result.train_rows is not None and result.test_rows is not None  # materialize=False fills the rows
        if split.drop_test_pairs_seen_in_train:
            assert seen_in_train is not None  # set above when the caller had none
            _drop_test_rows(keyed, balanced, result, seen_in_train(result.test_rows, result.train_rows), coded)
        gather_removed(balanced, coded)  # after the split: the removed rows' strings are not held through it
        if keep_codes:
            balanced.pool_codes = {name: coded.dense(name) for name in keep_codes if name in keyed.column_names}
    assert result.train_rows is not None and result.test_rows is not None and balanced.removed_rows is not None
    check_partition(pool.num_rows, result.train_rows, result.test_rows, balanced.removed_rows)
    return balanced, result


def _row_domains(pool: pa.Table, coded: codes.ColumnCodes, groups: pa.Table | None) -> pa.Array | None:
    """Each row's visual domain (its image's, ``image_groups.domains_of``), for the hallucination share; None for a
    pool without hallucination questions."""
    if "is_hallucination" not in pool.column_names or not pc.any(pool["is_hallucination"]).as_py():
        return None
    image, values = coded.dense("image_id")
    return domains_of(values, groups).take(pa.array(image, mask=image < 0))


def check_partition(n: int, *parts: np.ndarray) -> None:
    """Raise when the row numbers ``parts`` do not hold every row of 0..n-1 exactly once."""
    # n rows in all, each within 0..n-1, none left out: then none twice (a flag per row, not an int64 count)
    hit = np.zeros(n, dtype=bool)
    for part in parts:
        if len(part) and (part.min() < 0 or part.max() >= n):
            hit = None
            break
        hit[part] = True
    if hit is None or sum(len(part) for part in parts) != n or not hit.all():
        raise AssertionError("train + test + removed do not partition the pool")  # accounting invariant


POOL_CODES = ("image_id", "answer")  # the columns whose codes plan_release hands to the statistics' counts


def plan_release(pool: pa.Table, balance: BalanceConfig, split: SplitConfig, seed: int,
                 groups: pa.Table | None = None) -> BalancedSplit:
    """``balance_and_split`` without copying the pool: train, test and the pool (question_id
    order) as ``TableRows`` of ``pool``, for ``write_stats`` and ``write_release``.

    Same train/test rows, reports and removals as ``balance_and_split`` and a byte-identical
    release. Callers should drop their own reference to ``pool``: the views hold it, and the
    writer then combines its chunks column by column without a second copy of the pool.
    """
    balanced, result = decide(pool, balance, split, seed, keep_codes=POOL_CODES, groups=groups)
    view = TableRows(pool, balanced.question_id_order)
    balanced.pool_codes_of = view.shared  # the statistics use the codes only for views of this very table
    result.train, result.test = view.with_rows(result.train_rows), view.with_rows(result.test_rows)
    return BalancedSplit(pool=view, balance=balanced, split=result)


def balance_and_split(pool: pa.Table, balance: BalanceConfig, split: SplitConfig, seed: int,
                      groups: pa.Table | None = None) -> BalancedSplit:
    """``balance_questions`` then ``split_images`` over the kept rows, with one reordering take.

    Same train/test/reports as ``split_images(balance_questions(pool).kept)``; peak memory is
    two copies of the pool (the caller's and the reordered one) instead of four. Callers
    should drop their own reference and keep using ``result.pool`` (same rows, new order).
    """
    balanced, result = decide(pool, balance, split, seed, groups=groups)
    assert result.train_rows is not None and result.test_rows is not None  # decide fills the rows
    order = np.concatenate([result.train_rows, result.test_rows, balanced.removed_rows])
    reordered = codes.take_rows(pool, order)
    n_train, n_test = len(result.train_rows), len(result.test_rows)
    result.train = reordered.slice(0, n_train)
    result.test = reordered.slice(n_train, n_test)
    balanced.kept = reordered.slice(0, n_train + n_test)
    return BalancedSplit(pool=reordered, balance=balanced, split=result)


SEEN_IN_TRAIN = "seen_in_train"


def question_answer_pairs(table: pa.Table) -> pa.Array | pa.ChunkedArray:
    """The (question, answer) pair of each row as one string (what ``seen_in_train`` compares)."""
    question, answer = table["question"], table["answer"]
    if pa.large_string() in (question.type, answer.type):  # Arrow joins one type, separator included
        question, answer = question.cast(pa.large_string()), answer.cast(pa.large_string())
        return pc.binary_join_element_wise(question, answer, pa.scalar("\x1f", pa.large_string()))
    return pc.binary_join_element_wise(question, answer, "\x1f")


def pairs_seen_in_train(pool: pa.Table, test_rows: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
    """Mask of ``test_rows`` whose (question, answer) pair occurs among ``train_rows`` of ``pool``.

    Rows are matched on a 64-bit hash of the pair first; only the test rows whose hash occurs in
    train (the seen ones, and hash collisions) are compared as text with ``pairs_seen_as_text``.
    """
    key = _pair_keys(pool, codes.ColumnCodes(pool.select(["answer"])))
    return _seen_by_keys(pool, key, test_rows, train_rows)


def _seen_by_keys(pool: pa.Table, key: np.ndarray | None, test_rows: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
    """``pairs_seen_in_train`` from the rows' ``_pair_keys``."""
    if key is None:
        return pairs_seen_as_text(pool, test_rows, train_rows)
    # a train key occurs among the test keys exactly when it occurs among the test keys found in train
    maybe, partners = codes.mutual_in(key[test_rows], key[train_rows])
    seen = np.zeros(len(test_rows), dtype=bool)
    if maybe.any():
        seen[maybe] = pairs_seen_as_text(pool, test_rows[maybe], train_rows[partners])
    return seen


def _pair_keys(pool: pa.Table, coded: codes.ColumnCodes) -> np.ndarray | None:
    """Per row: a 64-bit hash of (question, answer code), 0 when either is null (null pairs all
    match, as in ``pairs_seen_as_text``); None when a question or answer holds the separator
    "\x1f", where joined texts of different pairs can be equal."""
    question = cast(pl.Series, pl.from_arrow(pool["question"]))
    answer, answers = coded.dense("answer")
    if question.str.contains("\x1f", literal=True).any() or pc.any(pc.match_substring(answers, "\x1f")).as_py():
        return None
    with np.errstate(over="ignore"):
        key = mix64(question.hash(0).to_numpy() ^ mix64(answer.astype(np.uint64)))
    key[question.is_null().to_numpy() | (answer < 0)] = 0
    return key


def pairs_seen_as_text(pool: pa.Table, test_rows: np.ndarray, train_rows: np.ndarray) -> np.ndarray:
    """``pairs_seen_in_train`` by comparing the joined (question, answer) texts of all the rows."""
    def pairs(rows: np.ndarray) -> pa.Array:
        return question_answer_pairs(pool.select(["question", "answer"]).take(pa.array(rows, pa.int64())))

    seen = pc.is_in(pairs(test_rows), value_set=pc.unique(pairs(train_rows)))
    return seen.to_numpy(zero_copy_only=False).astype(bool)


def _drop_test_rows(pool: pa.Table, balanced: BalanceResult, split: SplitResult, seen: np.ndarray,
                    coded: codes.ColumnCodes) -> None:
    """Move the ``seen`` test rows to the removed rows (reason ``seen_in_train``); the split
    report's test counts follow."""
    assert split.test_rows is not None  # a split with materialize=False
    dropped = split.test_rows[seen]
    split.test_rows = split.test_rows[~seen]
    _add_removed(pool, balanced, dropped, SEEN_IN_TRAIN, coded)
    image = coded.dense("image_id")[0][split.test_rows]
    test_images = int(np.count_nonzero(np.bincount(image[image >= 0])))  # distinct non-null images
    split.report["test"] = {"images": test_images, "questions": len(split.test_rows)}
    split.report["test_pairs_seen_in_train_removed"] = int(len(dropped))


HOP_MIX = "hop_mix"


def hop_quota(counts: dict[int, int], shares: dict[int, float]) -> dict[int, int]:
    """Questions to keep per hop: the largest total whose per-hop shares (renormalized over the hops
    that have questions and a share) fit the counts; a hop with share 0 keeps nothing."""
    present = {h: s for h, s in shares.items() if s > 0 and counts.get(h, 0) > 0}
    if not present:
        return dict(counts)
    norm = sum(present.values())
    total = min(counts[h] / (s / norm) for h, s in present.items())
    quota = {h: min(counts[h], int(round(total * present[h] / norm))) if h in present else 0 for h in counts}
    return {h: (n if h not in shares else quota[h]) for h, n in counts.items()}


def _apply_hop_mix(pool: pa.Table, balanced: BalanceResult, shares: dict[int, float] | None, seed: int,
                   coded: codes.ColumnCodes | None = None) -> None:
    """Downsample over-represented hops of the kept rows to ``shares`` (reason ``hop_mix``); record
    target and achieved shares in the balance report. No ``shares``: nothing changes."""
    if not shares:
        return
    hops = _hops(pool["n_hop"].take(pa.array(balanced.kept_rows)))  # int32 rows index as they are
    counts = dict(zip(*(a.tolist() for a in codes.unique_ints(hops, counts=True))))  # {hop: rows}, in hop order
    quota = hop_quota(counts, shares)
    random_key = keys.keys_of(keys.salt(seed, "hop_mix"), row_numbers(len(hops)))
    keep = np.zeros(len(hops), dtype=bool)
    for h in counts:  # each hop keeps its first ``quota`` rows in seeded random order
        mine = np.flatnonzero(hops == h)
        keep[mine] = keys.first_by_key(random_key[mine], quota.get(h, 0))
    assert balanced.kept_rows is not None  # balanced with materialize=False
    dropped = balanced.kept_rows[~keep]
    balanced.kept_rows = balanced.kept_rows[keep]
    _add_removed(pool, balanced, dropped, HOP_MIX, coded)
    kept = len(balanced.kept_rows)
    name = lambda h: NO_HOP_NAME if h == NO_HOP else str(h)  # noqa: E731
    balanced.report["hop_mix"] = {
        "target": {str(h): s for h, s in sorted(shares.items())},
        "before": {name(h): n for h, n in sorted(counts.items())},
        "after": {name(h): quota[h] for h in sorted(counts)},
        "achieved": {name(h): round(quota[h] / kept, 4) if kept else 0.0 for h in sorted(counts)},
    }


NO_HOP, NO_HOP_NAME = int(np.iinfo(np.int64).min), "<none>"  # a null n_hop: a hop of its own, without a share


def _hops(n_hop: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The hop counts as int64, a null as ``NO_HOP`` (so it is kept whole and reported as stats.py names a null)."""
    return pc.fill_null(n_hop.cast(pa.int64()), NO_HOP).to_numpy(zero_copy_only=False)


def _add_removed(pool: pa.Table, balanced: BalanceResult, rows: np.ndarray, reason: str,
                 coded: codes.ColumnCodes | None = None) -> None:
    """Append pool ``rows`` to the balance removals with ``reason`` and count them in the report
    (``coded``: codes of ``pool``'s columns, to gather through)."""
    add_removal(balanced, Removal.of(rows, reason), coded or codes.ColumnCodes(pool))
    if len(rows):
        balanced.report.setdefault("removed_by_reason", {})[reason] = int(len(rows))
        for key, change in (("questions_kept", -len(rows)), ("questions_removed", len(rows))):
            if key in balanced.report:
                balanced.report[key] += int(change)
