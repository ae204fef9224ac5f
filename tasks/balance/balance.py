"""Answer balancing per property group (ReasonVQA 3.3.1 after GQA), vectorized with numpy/polars.

Algorithm (one round; rounds repeat until a fixed point or ``config.rounds``):

1. Count the surviving questions per (property_id, answer) and rank each group's answers by
   count, most frequent first (ties: answer text ascending).
2. For each of the group's ``top_k`` answers with a non-empty tail (tail mass T = the
   questions of all answers ranked after it, including those beyond the top-k), and the next
   answer's count n, the target is
   ``min(c, max(min(floor(bound * T), floor(max_ratio * n)), ceil(min_ratio * n)))``,
   but at most ``ceil(max_round_fraction * c)`` questions go per round. All targets of a
   round are computed from the counts at the start of the round (the constraint of an answer
   only looks at less frequent answers, so this equals a pass in decreasing frequency).
3. From each answer over its target, remove the excess questions whose images hold the most
   surviving questions (counted over all groups at the start of the round), ties broken by
   a seeded random key of the question (tasks.balance.keys).

Invalid rows (no or an empty question_id, a repeated question_id, no image_id, no property_id,
no answer, a templated question without choices) are removed first with their reason and round 0,
so ``pool == kept + removed`` always.
tests/tasks/balance/reference.py implements the same algorithm row by row in plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import codes
from reasonvqa.rows import row_dtype, row_numbers
from reasonvqa.schemas import MULTIPLE_CHOICE_KINDS
from reasonvqa.tasks.balance import keys
from reasonvqa.tasks.balance.absence_filter import SET_ASIDE_REASONS, set_aside
from reasonvqa.tasks.balance.config import BalanceConfig
from reasonvqa.tasks.balance.summary import balance_report

REQUIRED_COLUMNS = ("question_id", "image_id", "property_id", "answer")

REMOVED = pa.schema(
    [
        ("question_id", pa.string()),
        ("property_id", pa.string()),
        ("answer", pa.string()),
        ("round", pa.int32()),  # 0 = invalid before balancing, k = removed in balancing round k
        ("reason", pa.string()),
    ]
)

# Order matters: a row gets the first reason that applies.
INVALID_REASONS = (
    "missing_question_id",
    "duplicate_question_id",
    "missing_image_id",
    "missing_property_id",
    "missing_answer",
    "missing_choices",
    *SET_ASIDE_REASONS,  # hallucination rows without an allowed absence basis (absence_filter.py)
)
NO_CHOICES = "__no_choices"  # a decision table's precomputed ``no_choices`` (partitioned.py reads no choices column)
BALANCE_REASONS = ("head_tail_bound", "max_ratio")


@dataclass
class BalanceResult:
    """Kept questions (pool schema), removals and the report.

    From ``balance_questions``, ``kept`` is sorted by question_id. ``pipeline.balance_and_split``
    replaces it with the slice train | test of its reordered pool (each part by question_id, so
    ``kept`` as a whole is not sorted then), and ``pipeline.plan_release`` leaves it None.
    ``kept_rows`` / ``removed_rows`` are the row numbers, in the pool given to balancing, of the
    kept questions (question_id order) and of the rows of ``removed`` (same order); ``kept`` is
    None when balancing ran with ``materialize=False``. From ``balance_questions(gather=False)`` ``removed`` is None
    and ``pending_removed`` holds its parts until ``gather_removed`` builds the table.
    """

    kept: pa.Table | None
    removed: pa.Table | None
    report: dict
    kept_rows: np.ndarray | None = None
    removed_rows: np.ndarray | None = None
    question_id_order: np.ndarray | None = None  # every pool row, by question_id (stable, nulls last)
    # from ``plan_release``: the decision's codes of some pool columns per pool row, {column: (code as int32, -1 for
    # null; the distinct values)}, which the statistics count instead of encoding the column again
    pool_codes: dict[str, tuple[np.ndarray, pa.Array]] | None = None
    pool_codes_of: object = None  # the table they code (``plan_release``: its views' shared table), checked by identity
    pending_removed: list[Removal] | None = None  # the parts of ``removed`` not gathered yet, in order


@dataclass
class Removal:
    """Pool rows to list in REMOVED, not gathered yet: their round and their reason (a code into ``reasons``)."""

    rows: np.ndarray
    round: np.ndarray
    reason: np.ndarray
    reasons: pa.Array

    @classmethod
    def of(cls, rows: np.ndarray, reason: str) -> "Removal":
        """``rows`` removed after the balancing rounds (round 0) for ``reason``."""
        none = np.zeros(len(rows), np.int8)
        return cls(rows, none, none, pa.array([reason], pa.string()))

    def table(self, coded: codes.ColumnCodes) -> pa.Table:
        """The REMOVED rows (``coded``: the codes of the pool the rows number)."""
        table = removed_columns(coded, self.rows)
        table = table.append_column("round", pa.array(self.round, pa.int32()))
        table = table.append_column("reason", self.reasons.take(pa.array(self.reason)))
        return table.cast(REMOVED)


def add_removal(balanced: BalanceResult, removal: Removal, coded: codes.ColumnCodes) -> None:
    """Append ``removal`` to ``balanced.removed`` (to its pending parts while those are kept) and its rows to
    ``removed_rows``."""
    if balanced.pending_removed is not None:
        balanced.pending_removed.append(removal)
    else:
        balanced.removed = pa.concat_tables([balanced.removed, removal.table(coded)])
    balanced.removed_rows = np.concatenate([balanced.removed_rows, removal.rows])


def gather_removed(balanced: BalanceResult, coded: codes.ColumnCodes) -> None:
    """Build ``balanced.removed`` from its pending parts (the same table, chunk for chunk, as when each part was
    gathered as it came)."""
    if balanced.pending_removed is not None:
        tables = [removal.table(coded) for removal in balanced.pending_removed]
        balanced.removed = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        balanced.pending_removed = None


def check_columns(pool: pa.Table) -> None:
    """Raise a clear error when the pool lacks a column balancing or splitting needs."""
    codes.require_columns(pool, REQUIRED_COLUMNS)


def no_choices(pool: pa.Table) -> pa.ChunkedArray | None:
    """Per row: True when its kind needs choices and it has none (null or ``[]``; the release's verify
    refuses such a question); the ``NO_CHOICES`` column when ``pool`` has it; None without a choices column."""
    if NO_CHOICES in pool.column_names:
        return pool[NO_CHOICES]
    if "choices" not in pool.column_names:
        return None
    choices = pool["choices"]
    if pa.types.is_null(choices.type):  # a column of nulls only (a pool made without the QUESTIONS schema)
        choices = choices.cast(pa.list_(pa.string()))
    none = pc.fill_null(pc.equal(pc.list_value_length(choices), 0), True)
    if "kind" not in pool.column_names:
        return none
    kind = pool["kind"]
    return pc.and_(none, pc.or_(pc.is_null(kind), pc.is_in(kind, pa.array(MULTIPLE_CHOICE_KINDS))))


def balance_questions(pool: pa.Table, config: BalanceConfig, seed: int, *, materialize: bool = True,
                      coded: codes.ColumnCodes | None = None, gather: bool = True) -> BalanceResult:
    """Downsample over-frequent answers per property group; deterministic for ``seed``.

    ``materialize=False`` leaves ``kept`` as None (``kept_rows`` says which pool rows
    survive), for callers that split straight from the pool to save one copy of it.
    ``coded``: the codes of ``pool``'s columns, when the caller shares them with later steps.
    ``gather=False`` leaves ``removed`` to ``gather_removed`` (the pipeline gathers it after the split, so the
    removed rows' strings are not held through it).
    """
    check_columns(pool)
    coded = coded or codes.ColumnCodes(pool)
    qid_order = coded.sorted("question_id")[0]
    invalid = _invalid_codes(pool, coded, config.absence_bases)
    enc = _encode(coded, qid_order[invalid[qid_order] == 0], seed)
    state = _run_rounds(enc, config)

    kept_rows = enc.rows[state.alive]
    removal = _removal(invalid, qid_order, enc.rows, state)
    props = enc.props_sorted.take(pa.array(enc.pair_group)).to_pylist()
    answers = enc.answers_sorted.take(pa.array(enc.pair_answer)).to_pylist()
    images_before, images_after = state.image_counts_before > 0, state.image_counts > 0
    report = balance_report(
        _nested_counts(props, answers, state.pair_counts_before),
        _nested_counts(props, answers, state.pair_counts),
        config,
        seed,
        questions_in=pool.num_rows,
        invalid={r: int((invalid == i + 1).sum()) for i, r in enumerate(INVALID_REASONS)},
        rounds=state.rounds,
        converged=state.converged,
        images_before=int(images_before.sum()),
        images_emptied=int((images_before & ~images_after).sum()),
    )
    kept = codes.take_rows(pool, kept_rows) if materialize else None
    result = BalanceResult(kept=kept, removed=None, report=report, kept_rows=kept_rows, removed_rows=removal.rows,
                           question_id_order=qid_order, pending_removed=[removal])
    if gather:
        gather_removed(result, coded)
    return result


@dataclass
class _Encoded:
    """The valid rows (in question_id order) as integer codes."""

    rows: np.ndarray  # pool row numbers
    pair: np.ndarray  # (property_id, answer) code, ordered by property then answer text
    image: np.ndarray
    key_rank: np.ndarray  # rank of the seeded random key
    pair_group: np.ndarray  # per pair: its property's code
    pair_answer: np.ndarray  # per pair: its answer's code
    n_pairs: int
    n_images: int
    props_sorted: pa.Array  # property code -> text
    answers_sorted: pa.Array  # answer code -> text


def _encode(coded: codes.ColumnCodes, rows: np.ndarray, seed: int) -> _Encoded:
    group_all, props_sorted = coded.dense("property_id")
    answer_all, answers_sorted = coded.dense("answer")
    group, answer = group_all[rows], answer_all[rows]
    image = coded.dense("image_id")[0][rows]
    n, dtype, numbers = len(rows), row_dtype(len(rows)), row_numbers(len(rows))
    random_key = keys.keys_of(keys.salt(seed, "balance"), numbers)
    key_rank = np.empty(n, dtype=dtype)
    key_rank[keys.key_order(random_key)] = numbers
    del random_key
    distinct_pairs, pair = codes.unique_ints(pair_codes(group, answer), inverse=True, dtype=dtype)
    n_pairs = len(distinct_pairs)
    first_row_of_pair = np.zeros(n_pairs, dtype=np.int64)
    first_row_of_pair[pair[::-1]] = numbers[::-1]
    return _Encoded(
        rows=rows, pair=pair, image=image, key_rank=key_rank,
        pair_group=group[first_row_of_pair], pair_answer=answer[first_row_of_pair],
        n_pairs=n_pairs, n_images=int(image.max(initial=-1)) + 1,
        props_sorted=props_sorted, answers_sorted=answers_sorted,
    )


def pair_codes(group: np.ndarray, answer: np.ndarray) -> np.ndarray:
    """One int64 per row for its (group, answer) codes, ordered like the pairs: ``group * (most answer + 1) +
    answer``, computed in int64 (narrow codes, e.g. int32, would overflow once groups x answers pass 2^31)."""
    pair = group.astype(np.int64)
    pair *= int(answer.max(initial=0)) + 1
    pair += answer
    return pair


@dataclass
class _RoundsState:
    alive: np.ndarray
    removed_round: np.ndarray
    removed_reason: np.ndarray
    rounds: list[dict]
    converged: bool
    # questions per pair and per image code, before the rounds and surviving them (what the rounds track)
    pair_counts_before: np.ndarray
    pair_counts: np.ndarray
    image_counts_before: np.ndarray
    image_counts: np.ndarray


def _run_rounds(enc: _Encoded, config: BalanceConfig) -> _RoundsState:
    """Balancing rounds until a fixed point or ``config.rounds``."""
    n = len(enc.rows)
    pairs_before = np.bincount(enc.pair, minlength=enc.n_pairs)
    images_before = np.bincount(enc.image, minlength=enc.n_images)
    # surviving questions per pair and per image, updated in place by each round's removals
    counts, image_count = pairs_before.copy(), images_before.copy()
    round_dtype = np.int8 if config.rounds <= np.iinfo(np.int8).max else np.int32  # round numbers, not rows
    state = _RoundsState(np.ones(n, dtype=bool), np.zeros(n, dtype=round_dtype), np.zeros(n, dtype=np.int8), [], False,
                         pairs_before, counts, images_before, image_count)
    alive = state.alive
    left = n
    for round_no in range(1, config.rounds + 1 if config.enabled else 1):
        target, reason = pair_targets(counts, enc.pair_group, config)
        excess = counts - target
        if not excess.any():
            state.converged = True
            return state
        candidates = np.flatnonzero(alive & (excess > 0)[enc.pair])  # a bool per row, not an int64 gather
        order = _priority_order(enc.pair[candidates], image_count[enc.image[candidates]], enc.key_rank[candidates])
        ranked = candidates[order]
        ranked_pair = enc.pair[ranked]
        rank_in_pair = np.arange(len(ranked)) - np.searchsorted(ranked_pair, ranked_pair, side="left")
        drop = ranked[rank_in_pair < excess[ranked_pair]]
        alive[drop] = False
        dropped_pair = enc.pair[drop]
        counts -= np.bincount(dropped_pair, minlength=enc.n_pairs)
        image_count -= np.bincount(enc.image[drop], minlength=enc.n_images)
        left -= len(drop)
        state.removed_round[drop] = round_no
        state.removed_reason[drop] = reason[dropped_pair]
        state.rounds.append(_round_entry(round_no, reason[dropped_pair], enc.pair_group[dropped_pair], left))
    if config.enabled:
        state.converged = not (counts - pair_targets(counts, enc.pair_group, config)[0]).any()
    return state


def pair_targets(counts: np.ndarray, pair_group: np.ndarray, config: BalanceConfig) -> tuple[np.ndarray, np.ndarray]:
    """Target count per (group, answer) pair for one round, and the binding bound's reason code.

    Pair codes must be ordered by (group, answer text). Reason codes: 1 head_tail_bound,
    2 max_ratio (index + 1 into BALANCE_REASONS).
    """
    target = counts.copy()
    reason = np.ones(len(counts), dtype=np.int8)
    present = np.flatnonzero(counts > 0)
    if len(present) == 0:
        return target, reason
    g, c = pair_group[present], counts[present]
    order = np.lexsort((present, -c, g))
    pairs, g, c = present[order], g[order], c[order]
    n = len(pairs)
    starts = np.searchsorted(g, g, side="left")
    rank = np.arange(n) - starts
    cum = np.cumsum(c)
    ends = np.searchsorted(g, g, side="right") - 1
    tail = cum[ends] - cum  # mass of the answers ranked after this one in its group
    next_count = np.zeros(n, dtype=np.int64)
    has_next = np.arange(n) < ends
    next_count[has_next] = c[np.flatnonzero(has_next) + 1]

    by_tail = np.floor(config.head_tail_bound * tail).astype(np.int64)
    by_ratio = np.floor(config.max_ratio * next_count).astype(np.int64)
    floor_ = np.ceil(config.min_ratio * next_count).astype(np.int64)
    goal = np.minimum(c, np.maximum(np.minimum(by_tail, by_ratio), floor_))
    step_floor = c - np.ceil(config.max_round_fraction * c).astype(np.int64)
    reducible = (rank < config.top_k) & (tail > 0)
    target[pairs] = np.where(reducible, np.maximum(goal, step_floor), c)
    reason[pairs] = np.where(by_tail <= by_ratio, 1, 2)
    return target, reason


def _priority_order(pair: np.ndarray, image_count: np.ndarray, key_rank: np.ndarray) -> np.ndarray:
    """Order by pair, then image question count descending, then random key."""
    if len(pair) == 0:
        return np.zeros(0, dtype=np.int64)
    top = int(image_count.max())
    b_key, b_cnt = int(key_rank.max()).bit_length(), top.bit_length()
    if int(pair.max()).bit_length() + b_cnt + b_key <= 63:
        composite = pair.astype(np.int64)  # built in place: one int64 temporary per candidate, not four
        composite <<= b_cnt + b_key
        fewer = top - image_count
        fewer <<= b_key
        composite |= fewer
        del fewer
        composite |= key_rank
        return np.argsort(composite)
    return np.lexsort((key_rank, -image_count, pair))


def _invalid_codes(pool: pa.Table, coded: codes.ColumnCodes, absence_bases: list[str] | None = None) -> np.ndarray:
    """Per row: 0 valid, else 1 + index of its first reason in INVALID_REASONS."""
    conditions = [
        codes.missing(pool["question_id"]),
        coded.sorted("question_id")[1],
        coded.missing("image_id"),
        coded.missing("property_id"),
        coded.missing("answer"),
        _no_choices_rows(pool),
        *set_aside(pool, absence_bases),
    ]
    invalid = np.zeros(pool.num_rows, dtype=np.int8)  # np.select would build int64 per row first
    for code in range(len(conditions), 0, -1):  # the first reason that applies is written last
        invalid[conditions[code - 1]] = code
    return invalid


def _no_choices_rows(pool: pa.Table) -> np.ndarray:
    """``no_choices`` as numpy (all False without a choices column)."""
    flags = no_choices(pool)
    if flags is None:
        return np.zeros(pool.num_rows, dtype=bool)
    return codes.combined(flags).to_numpy(zero_copy_only=False).astype(bool, copy=False)


def _round_entry(round_no: int, reason_codes: np.ndarray, groups: np.ndarray, after: int) -> dict:
    by_reason = np.bincount(reason_codes, minlength=len(BALANCE_REASONS) + 1)
    return {
        "round": round_no,
        "removed": int(len(reason_codes)),
        "by_reason": {r: int(by_reason[i + 1]) for i, r in enumerate(BALANCE_REASONS) if by_reason[i + 1]},
        "groups_touched": int(len(np.unique(groups))),
        "questions_after": after,
    }


def removed_columns(coded: codes.ColumnCodes, rows: np.ndarray) -> pa.Table:
    """question_id, property_id and answer of the pool ``rows`` (``coded``'s table): REMOVED's first columns."""
    return pa.table({name: coded.take(name, rows) for name in ("question_id", "property_id", "answer")})


def _removal(invalid: np.ndarray, qid_order: np.ndarray, valid_rows: np.ndarray, state: _RoundsState) -> Removal:
    """Removed rows ordered by question_id (nulls last), then pool row, with their round and reason."""
    n = len(invalid)
    reason_code = invalid.copy()  # 1..6 invalid, 7.. balance reasons, 0 kept (int8)
    round_of = np.zeros(n, dtype=state.removed_round.dtype)
    gone = ~state.alive
    dropped = valid_rows[gone]
    reason_code[dropped] = len(INVALID_REASONS) + state.removed_reason[gone]
    round_of[dropped] = state.removed_round[gone]
    rows = qid_order[reason_code[qid_order] > 0]
    names = pa.array(("",) + INVALID_REASONS + BALANCE_REASONS, pa.string())
    return Removal(rows, round_of[rows], reason_code[rows], names)


def _nested_counts(props: list, answers: list, counts: np.ndarray) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for prop, answer, count in zip(props, answers, counts.tolist()):
        if count:
            out.setdefault(prop, {})[answer] = count
    return out
