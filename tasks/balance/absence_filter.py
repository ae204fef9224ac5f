"""Which hallucination rows a release takes by the basis of their absence claim (``balance.absence_bases``).

A hallucination row without ``absence_basis`` (null: e.g. the most co-occurring absent label of a
Visual Genome image, likely present but unannotated) is set aside as ``no_absence_basis``; one whose
basis is not among ``absence_bases`` as ``absence_basis_not_allowed``. Both are removals of round 0
(before balancing), so the pool keeps them (``pool/``, ``stats/removed``), the balance report counts
them and a review (annotation_exports) can bring them back with basis ``review``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa.codes import combined, filled

SET_ASIDE_REASONS = ("no_absence_basis", "absence_basis_not_allowed")


def set_aside(pool: pa.Table, allowed: list[str] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (hallucination without a basis, hallucination whose basis is not in ``allowed``; None: any basis)."""
    halluc = _numpy(filled(pool, "is_hallucination", False))
    if not halluc.any():
        none = np.zeros(pool.num_rows, dtype=bool)
        return none, none
    basis = combined(pool["absence_basis"]) if "absence_basis" in pool.column_names else pa.nulls(pool.num_rows, pa.string())
    unbased = halluc & _numpy(pc.is_null(basis))
    if allowed is None:
        return unbased, np.zeros(pool.num_rows, dtype=bool)
    taken = _numpy(pc.fill_null(pc.is_in(basis, pa.array(sorted(set(allowed)), pa.string())), False))
    return unbased, halluc & ~unbased & ~taken


def _numpy(flags: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return combined(flags).to_numpy(zero_copy_only=False).astype(bool, copy=False)
