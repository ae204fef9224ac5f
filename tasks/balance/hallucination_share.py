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
  share reaches ``share - tolerance / 2`` (inside the band, with a margin for the split), first those
  that name no form in ``template_ids`` (forms no hallucination question takes: "What is the red object
  in the image?"), so the forms both outcomes share keep their real questions and their wording
  stays uninformative (a real row names its form where hallucination questions share it:
  ``grounded:identify_position``);
- h = 0: nothing can be done by removal; the cell is kept and reported.
Which questions go: a seeded hash order of their ids (removal reason ``hallucination_share``), after the
order above.

Exempt (a stated rule, not a gap): grounded questions about images of a source whose regions carry no
class label (``Source.unlabeled_regions``: SA-1B's masks). No absence can be claimed there (an unlabeled
mask may show anything; hallucination.py makes none), so they count in no cell; the report lists them
under ``exempt`` with the rule, per source and per visual domain, and a domain made only of them has no
share to be outside the tolerance.
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

from reasonvqa.absence_bases import EXEMPT_RULE, unlabeled_source_kinds
from reasonvqa.schemas import GROUNDED_KINDS
from reasonvqa.tasks.balance.groups import forms

REASON = "hallucination_share"
TOLERANCE = 0.10  # points of share a task type or a visual domain may differ from the target (issue 30)


def exempt_rows(image_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Per row: whether its image id (``<kind>:<native id>``) is of a source with unlabeled regions."""
    kinds = unlabeled_source_kinds()
    if not kinds or len(image_ids) == 0:
        return np.zeros(len(image_ids), dtype=bool)
    source = pc.list_element(pc.split_pattern(pc.fill_null(image_ids, ""), ":", max_splits=1), 0)
    return pc.fill_null(pc.is_in(source, pa.array(kinds)), False).to_numpy(zero_copy_only=False)


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
    exempt = grounded & ~halluc & exempt_rows(pool["image_id"].take(take))
    grounded &= ~exempt
    task_names, task = _codes(pool["task_type"].take(take) if "task_type" in pool.column_names else None, len(rows))
    domain_names, domain = _codes(domains.take(take) if domains is not None else None, len(rows))
    cell = task * len(domain_names) + domain
    named = forms(pool)  # per pool row: the form a row names (null: none)
    shared = np.zeros(len(rows), dtype=bool) if named is None else pc.is_valid(named.take(take)).to_numpy(zero_copy_only=False)
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
        drop[_last_by_hash(pool, rows, cut, seed, keep, first=shared[cut])] = True
        changed.append({"task_type": task_names[c // len(domain_names)], "visual_domain": domain_names[c % len(domain_names)],
                        "hallucination": h, "grounded": g, "dropped": int(len(cut) - keep),
                        "dropped_kind": "hallucination" if cut is h_at else "grounded"})
    if drop.any():
        balanced.kept_rows = rows[~drop]
        remove(pool, balanced, rows[drop], REASON)
    after = (before[0] & ~drop, before[1] & ~drop)
    balanced.report["hallucination_share"] = _report(share, tolerance, before, after, task_names, task,
                                                     domain_names, domain, changed)
    balanced.report["hallucination_share"]["exempt"] = _exempt(pool, rows, exempt, domain_names, domain)


def _exempt(pool: pa.Table, rows: np.ndarray, exempt: np.ndarray, domain_names: list[str], domain: np.ndarray) -> dict:
    """The exempt questions (``EXEMPT_RULE``): how many, per source kind and per visual domain."""
    at = np.flatnonzero(exempt)
    ids = pool["image_id"].take(pa.array(rows[at], pa.int64())).to_pylist()
    by_source: dict[str, int] = {}
    for image_id in ids:
        kind = image_id.partition(":")[0]
        by_source[kind] = by_source.get(kind, 0) + 1
    by_domain = np.bincount(domain[at], minlength=len(domain_names))
    return {"rule": EXEMPT_RULE, "questions": int(len(at)), "by_source": dict(sorted(by_source.items())),
            "by_visual_domain": {domain_names[i]: int(n) for i, n in enumerate(by_domain) if n}}


def _codes(values: pa.Array | pa.ChunkedArray | None, n: int) -> tuple[list[str], np.ndarray]:
    """(names, code per row) of a string column (null: "<none>"); None: one name for all rows."""
    if values is None:
        return ["<all>"], np.zeros(n, dtype=np.int64)
    encoded = pc.dictionary_encode(pc.fill_null(values.cast(pa.string()), "<none>"))
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    return encoded.dictionary.to_pylist(), encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _last_by_hash(pool: pa.Table, rows: np.ndarray, at: np.ndarray, seed: int, keep: int,
                  first: np.ndarray | None = None) -> np.ndarray:
    """The positions of ``at`` beyond the first ``keep`` in a seeded hash order of their question ids (those
    marked in ``first`` ahead of the others: they are kept first)."""
    ids = pool["question_id"].take(pa.array(rows[at], pa.int64())).to_pylist()
    keys = [(not f, hashlib.blake2b(f"{seed}\x1f{q}".encode(), digest_size=8).digest())
            for q, f in zip(ids, first if first is not None else np.zeros(len(ids), dtype=bool))]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return at[np.array(order[keep:], dtype=np.int64)]


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
