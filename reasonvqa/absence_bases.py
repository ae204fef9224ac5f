"""The vocabulary of the QUESTIONS columns ``absence_basis`` and ``absence_evidence``.

What each basis means, and how the questions stage chooses one, is in ``tasks/questions/absence.py``;
the balancing, the release checks and the review exports read the names from here.
"""

from __future__ import annotations

import json

ABSENT_OBJECT_BASES = ("taxonomy", "review", "detector", "cooccurrence")
ATTRIBUTE_BASIS = "annotated_attribute"
RELATION_BASES = ("refuting_boxes", "annotated_relation")
VLM_BASIS = "vlm"
# every basis a hallucination row may name, strongest first (the card lists them in this order)
BASES = ("taxonomy", "review", "annotated_attribute", "refuting_boxes", "annotated_relation", "detector", "vlm",
         "cooccurrence")


def evidence_text(evidence: dict | None) -> str | None:
    """``absence_evidence`` as stored: sorted-key compact JSON, None for no evidence."""
    return json.dumps(evidence, sort_keys=True, separators=(",", ":")) if evidence else None
