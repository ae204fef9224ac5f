"""Hallucination share of the released grounded questions (VistaQA 3.1: about 27%).

Grounded questions are generated with every valid hallucination candidate (tasks/questions/
hallucination.py); answer balancing then thins the grounded answers but hardly the hallucination
ones (their answers name different absent objects). After balancing, hallucination questions of
the grounded kinds are downsampled, in a seeded hash order of their ids, to ``share`` of the kept
grounded questions (removal reason ``hallucination_share``). Fewer than the target: all are kept
and the report says so.
"""

from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

GROUNDED_KINDS = ("grounded", "grounded_vlm")
REASON = "hallucination_share"


def hallucination_target(grounded: int, share: float) -> int:
    """Hallucination questions that make ``share`` of all beside ``grounded`` other grounded questions."""
    return int(share / (1 - share) * grounded + 0.5) if share > 0 else 0


def apply_hallucination_share(pool: pa.Table, balanced, share: float | None, seed: int,
                              remove: Callable[[pa.Table, object, np.ndarray, str], None]) -> None:
    """Drop kept hallucination rows over the share (``remove(pool, balanced, rows, reason)`` records them)."""
    if share is None or "is_hallucination" not in pool.column_names or "kind" not in pool.column_names:
        return
    rows = balanced.kept_rows
    take = pa.array(rows)
    grounded = pc.fill_null(pc.is_in(pool["kind"].take(take), pa.array(GROUNDED_KINDS)), False).to_numpy(zero_copy_only=False)
    halluc = pc.fill_null(pool["is_hallucination"].take(take), False).to_numpy(zero_copy_only=False)
    at = np.flatnonzero(grounded & halluc)
    others = int((grounded & ~halluc).sum())
    if not len(at):
        return  # no hallucination question: nothing to do, nothing to report
    target = hallucination_target(others, share)
    report = {"target_share": share, "grounded": others, "hallucination_before": int(len(at)), "target": target}
    if len(at) > target:
        ids = pool["question_id"].take(pa.array(rows[at], pa.int64())).to_pylist()
        keys = [hashlib.blake2b(f"{seed}\x1f{q}".encode(), digest_size=8).digest() for q in ids]
        drop = at[np.argsort(np.array(keys, dtype=object), kind="stable")[target:]]
        keep = np.ones(len(rows), dtype=bool)
        keep[drop] = False
        balanced.kept_rows = rows[keep]
        remove(pool, balanced, rows[drop], REASON)
    kept = min(target, len(at))
    report["hallucination_after"] = kept
    report["achieved_share"] = round(kept / (kept + others), 4) if kept + others else None
    balanced.report["hallucination_share"] = report
