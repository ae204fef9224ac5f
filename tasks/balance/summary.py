"""Plain-Python summaries of answer distributions, shared by the engine, the reference and stats.

All functions take ``{answer: count}`` mappings and return JSON-ready values with floats
rounded to 6 places, so reports are byte-stable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from reasonvqa.tasks.balance.absence_filter import SET_ASIDE_REASONS
from reasonvqa.tasks.balance.config import BalanceConfig


def ranked(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """Answers with a positive count, most frequent first (ties: answer text ascending)."""
    return sorted(((a, c) for a, c in counts.items() if c > 0), key=lambda ac: (-ac[1], ac[0]))


def entropy_bits(counts: Mapping[str, int]) -> float:
    """Shannon entropy (bits) of an answer distribution; 0.0 for an empty one."""
    return _entropy_of_ranked(ranked(counts))


def _entropy_of_ranked(items: list[tuple[str, int]]) -> float:
    total = sum(c for _, c in items)
    if total == 0:
        return 0.0
    h = -sum((c / total) * math.log2(c / total) for _, c in items)
    return round(h + 0.0, 6)


def js_divergence_bits(p: Mapping[str, int], q: Mapping[str, int]) -> float | None:
    """Jensen-Shannon divergence (bits, in [0, 1]) between two count distributions; None if one is empty."""
    tp, tq = sum(p.values()), sum(q.values())
    if tp == 0 or tq == 0:
        return None
    total = 0.0
    for answer in sorted(set(p) | set(q)):
        pa_, qa = p.get(answer, 0) / tp, q.get(answer, 0) / tq
        m = (pa_ + qa) / 2
        if pa_ > 0:
            total += 0.5 * pa_ * math.log2(pa_ / m)
        if qa > 0:
            total += 0.5 * qa * math.log2(qa / m)
    return round(max(total, 0.0), 6)


def _violations_of_ranked(items: list[tuple[str, int]], config: BalanceConfig) -> list[dict]:
    """Answers of one group (``items`` ranked) whose count exceeds ``head_tail_bound`` times their tail mass.

    Only the ``top_k`` answers with a non-empty tail are bounded. With ``min_ratio`` 1 a
    converged balancing leaves none; a larger ``min_ratio`` may keep an answer above the
    bound to preserve the order margin, and then it is listed here.
    """
    tail = sum(c for _, c in items)
    out = []
    for rank, (answer, count) in enumerate(items):
        tail -= count
        if rank < config.top_k and tail > 0 and count > config.head_tail_bound * tail:
            out.append({"answer": answer, "count": count, "tail": tail})
    return out


def group_summary(before: Mapping[str, int], after: Mapping[str, int], config: BalanceConfig) -> dict:
    """Before/after numbers of one property group for the balancing report."""
    n_before, n_after = sum(before.values()), sum(after.values())
    ranked_before, ranked_after = ranked(before), ranked(after)  # each sorted once
    top_before = ranked_before[:1]
    top_after = ranked_after[:1]
    return {
        "questions_before": n_before,
        "questions_after": n_after,
        "removed": n_before - n_after,
        "answers_before": sum(1 for c in before.values() if c > 0),
        "answers_after": sum(1 for c in after.values() if c > 0),
        "entropy_before": _entropy_of_ranked(ranked_before),
        "entropy_after": _entropy_of_ranked(ranked_after),
        "top_share_before": round(top_before[0][1] / n_before, 6) if n_before else None,
        "top_share_after": round(top_after[0][1] / n_after, 6) if n_after else None,
        "bound_violations": _violations_of_ranked(ranked_after, config),
    }


def balance_report(
    before: Mapping[str, Mapping[str, int]],
    after: Mapping[str, Mapping[str, int]],
    config: BalanceConfig,
    seed: int,
    *,
    questions_in: int,
    invalid: Mapping[str, int],
    rounds: list[dict],
    converged: bool,
    images_before: int,
    images_emptied: int,
) -> dict:
    """The full balancing report (identical for the vectorized engine and the reference)."""
    groups = {g: group_summary(before[g], after.get(g, {}), config) for g in sorted(before)}
    kept = sum(s["questions_after"] for s in groups.values())
    balanced_away = sum(r["removed"] for r in rounds)
    removed_by_reason: dict[str, int] = {k: v for k, v in invalid.items() if v}
    for r in rounds:
        for reason, n in r["by_reason"].items():
            removed_by_reason[reason] = removed_by_reason.get(reason, 0) + n
    warnings = []
    single = [g for g, s in groups.items() if s["answers_before"] == 1]
    if single:
        warnings.append(
            f"{len(single)} property group(s) have a single answer and cannot be balanced "
            f"(kept as they are): {', '.join(single[:10])}{' ...' if len(single) > 10 else ''}"
        )
    broken = {k: v for k, v in invalid.items() if v and k not in SET_ASIDE_REASONS}
    if broken:
        warnings.append("removed invalid questions before balancing: " + ", ".join(f"{k}={v}" for k, v in sorted(broken.items())))
    aside = {k: v for k, v in invalid.items() if v and k in SET_ASIDE_REASONS}
    if aside:
        warnings.append("set aside hallucination questions without an allowed absence basis (kept in pool/ for review): "
                        + ", ".join(f"{k}={v}" for k, v in sorted(aside.items())))
    if not converged and config.enabled:
        warnings.append(f"balancing stopped after {len(rounds)} round(s) before reaching its fixed point")
    if questions_in and kept == 0:
        warnings.append("no question survived balancing")
    valid = questions_in - sum(invalid.values())
    return {
        "seed": seed,
        "config": config.model_dump(mode="json"),
        "questions_in": questions_in,
        "questions_kept": kept,
        "questions_removed": questions_in - kept,
        "removed_by_reason": dict(sorted(removed_by_reason.items())),
        "balanced_away_share": round(balanced_away / valid, 6) if valid else 0.0,
        "rounds": rounds,
        "rounds_run": len(rounds),
        "converged": converged,
        "groups": groups,
        "single_answer_groups": single,
        "groups_with_bound_violations": [g for g, s in groups.items() if s["bound_violations"]],
        "images_before": images_before,
        "images_emptied": images_emptied,
        "warnings": warnings,
    }
