"""The ``detector`` absence basis: a prompted class the proposals stage's detector found no box for.

The proposals stage (tasks/proposals/stage.py) prompts GroundingDINO with an image's tags and writes, per
image, the prompted classes no box reached the box threshold for, with the best probability the detector
gave them (its ``negatives`` table). Such a class may be claimed absent with basis ``detector``, evidence
``{"model", "threshold", "best_score"}``: weaker than a taxonomy or a review, stronger than co-occurrence.
It never applies to an image whose absences a taxonomy decides (nuScenes, a COCO image): only taxonomy
classes are claimed there.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa.tasks.questions.absence import AbsentLabel
from reasonvqa.work_files import present


def negatives_part(proposals_regions: Path | None) -> Path | None:
    """The proposals stage's negatives file beside its regions file of the same shard."""
    return None if proposals_regions is None else proposals_regions.parent.parent / "negatives" / proposals_regions.name


def read_negatives(path: Path | None) -> pa.Table | None:
    """The shard's negatives, or None where the proposals stage did not run (or ran before recording them)."""
    return pq.read_table(path) if path is not None and present(path) else None


def with_detector_negatives(absent: dict[str, list[AbsentLabel]], negatives: pa.Table | None,
                            images: set[str]) -> dict[str, list[AbsentLabel]]:
    """``absent`` with a ``detector`` claim for each negative of ``images`` that no other basis claims; an unbased
    choice of the same label gives way to it."""
    if negatives is None or negatives.num_rows == 0:
        return absent
    claims: dict[str, list[AbsentLabel]] = {}
    for r in negatives.to_pylist():
        if r["image_id"] in images:
            claims.setdefault(r["image_id"], []).append(AbsentLabel(r["label"], "detector", {
                "model": r["model"], "threshold": r["threshold"], "best_score": r["best_score"]}))
    out = dict(absent)
    for image_id, found in claims.items():
        current = absent.get(image_id, [])
        based = {c.label for c in current if c.basis is not None}
        found = [c for c in found if c.label not in based]
        taken = {c.label for c in found}
        out[image_id] = [c for c in current if c.basis is not None or c.label not in taken] + found
    return out
