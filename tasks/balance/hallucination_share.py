"""Hallucination share of the released grounded questions (VistaQA 3.1: about 27%), per task type and domain.

Grounded questions are generated with every valid hallucination candidate (tasks/questions/
hallucination.py); answer balancing then thins the grounded answers but hardly the hallucination
ones (their answers name different absent objects). VistaQA balances hallucination and real samples
across its domains (fig. 2b), so the share is held per cell (task type, visual domain) of the kept
grounded questions, not only overall: a task type or domain made mostly of hallucination questions
would let a reader tell them apart from the question's topic alone.

Per cell, with h hallucination and g other grounded questions:
- h over ``hallucination_target(g, share)``: hallucination questions are dropped down to it;
- a share under ``share - tolerance`` (and h > 0): other grounded questions are dropped until the
  share reaches ``share - tolerance / 2`` (inside the band, with a margin for the split);
- h = 0: nothing can be done by removal; the cell is kept and reported.
Which questions go: a seeded hash order of their ids (removal reason ``hallucination_share``).
The report gives the target, the cells changed, and per task type and per visual domain the share
before and after, listing those left outside ``share +- tolerance``.
"""

from __future__ import annotations

import hashlib
import math
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa.schemas import GROUNDED_KINDS

REASON = "hallucination_share"
TOLERANCE = 0.10  # points of share a task type or a visual domain may differ from the target (issue 30)


def hallucination_target(grounded: int, share: float) -> int:
    """Hallucination questions that make ``share`` of all beside ``grounded`` other grounded questions."""
    return int(share / (1 - share) * grounded + 0.5) if share > 0 else 0


def grounded_target(hallucination: int, share: float) -> int:
    """The most other grounded questions beside ``hallucination`` ones that keep the share at least ``share``."""
    return math.floor(hallucination * (1 - share) / share) if share > 0 else 0


def apply_hallucination_share(pool: pa.Table, balanced, share: float | None, seed: int,
                              remove: Callable[[pa.Table, object, np.ndarray, str], None],
                              domains: pa.Array | pa.ChunkedArray | None = None, tolerance: float = TOLERANCE) -> None:
    """Drop kept rows so every (task type, visual domain) cell holds about ``share`` hallucination questions
    (``remove(pool, balanced, rows, reason)`` records them). ``domains``: each pool row's visual domain (None:
    one domain for all)."""
    if share is None or "is_hallucination" not in pool.column_names or "kind" not in pool.column_names:
        return
    rows = balanced.kept_rows
    take = pa.array(rows)
    grounded = pc.fill_null(pc.is_in(pool["kind"].take(take), pa.array(GROUNDED_KINDS)), False).to_numpy(zero_copy_only=False)
    halluc = pc.fill_null(pool["is_hallucination"].take(take), False).to_numpy(zero_copy_only=False) & grounded
    if not halluc.any():
        return  # no hallucination question: nothing to do, nothing to report
    task_names, task = _codes(pool["task_type"].take(take) if "task_type" in pool.column_names else None, len(rows))
    domain_names, domain = _codes(domains.take(take) if domains is not None else None, len(rows))
    cell = task * len(domain_names) + domain
    before = (halluc.copy(), grounded & ~halluc)
    drop = np.zeros(len(rows), dtype=bool)
    changed = []
    for c in np.unique(cell[grounded]).tolist():
        mine = grounded & (cell == c)
        h_at, g_at = np.flatnonzero(mine & halluc), np.flatnonzero(mine & ~halluc)
        h, g = len(h_at), len(g_at)
        if h > hallucination_target(g, share):
            cut, keep = h_at, hallucination_target(g, share)
        elif h and h / (h + g) < share - tolerance:
            cut, keep = g_at, grounded_target(h, share - tolerance / 2)
        else:
            continue
        drop[_last_by_hash(pool, rows, cut, seed, keep)] = True
        changed.append({"task_type": task_names[c // len(domain_names)], "visual_domain": domain_names[c % len(domain_names)],
                        "hallucination": h, "grounded": g, "dropped": int(len(cut) - keep),
                        "dropped_kind": "hallucination" if cut is h_at else "grounded"})
    if drop.any():
        balanced.kept_rows = rows[~drop]
        remove(pool, balanced, rows[drop], REASON)
    after = (before[0] & ~drop, before[1] & ~drop)
    balanced.report["hallucination_share"] = _report(share, tolerance, before, after, task_names, task,
                                                     domain_names, domain, changed)


def _codes(values: pa.Array | pa.ChunkedArray | None, n: int) -> tuple[list[str], np.ndarray]:
    """(names, code per row) of a string column (null: "<none>"); None: one name for all rows."""
    if values is None:
        return ["<all>"], np.zeros(n, dtype=np.int64)
    encoded = pc.dictionary_encode(pc.fill_null(values.cast(pa.string()), "<none>"))
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _last_by_hash(pool: pa.Table, rows: np.ndarray, at: np.ndarray, seed: int, keep: int) -> np.ndarray:
    """The positions of ``at`` beyond the first ``keep`` in a seeded hash order of their question ids."""
    ids = pool["question_id"].take(pa.array(rows[at], pa.int64())).to_pylist()
    keys = [hashlib.blake2b(f"{seed}\x1f{q}".encode(), digest_size=8).digest() for q in ids]
    return at[np.argsort(np.array(keys, dtype=object), kind="stable")[keep:]]


def _report(share: float, tolerance: float, before: tuple, after: tuple, task_names: list[str], task: np.ndarray,
            domain_names: list[str], domain: np.ndarray, changed: list[dict]) -> dict:
    """Overall, per task type and per visual domain: hallucination and other grounded questions before and after."""
    def counts(h: np.ndarray, g: np.ndarray, codes: np.ndarray, names: list[str]) -> dict:
        nh, ng = np.bincount(codes[h], minlength=len(names)), np.bincount(codes[g], minlength=len(names))
        return {names[i]: (int(nh[i]), int(ng[i])) for i in range(len(names)) if nh[i] + ng[i]}

    def share_of(h: int, g: int) -> float | None:
        return round(h / (h + g), 4) if h + g else None

    out: dict = {"target_share": share, "tolerance": tolerance}
    (hb, gb), (ha, ga) = before, after
    out |= {"grounded": int(ga.sum()), "hallucination_before": int(hb.sum()), "hallucination_after": int(ha.sum()),
            "achieved_share": share_of(int(ha.sum()), int(ga.sum())), "cells_changed": changed}
    outside = []
    for name, codes, names in (("by_task_type", task, task_names), ("by_visual_domain", domain, domain_names)):
        was, now = counts(hb, gb, codes, names), counts(ha, ga, codes, names)
        out[name] = {key: {"before": share_of(*was[key]), "after": share_of(*now.get(key, (0, 0))),
                           "hallucination": now.get(key, (0, 0))[0], "grounded": now.get(key, (0, 0))[1]}
                     for key in sorted(was)}
        outside += [f"{name[3:]} {key}: {v['after']}" for key, v in out[name].items()
                    if v["after"] is not None and abs(v["after"] - share) > tolerance]
    out["outside_tolerance"] = outside
    return out
