"""The vocabulary of the QUESTIONS columns ``absence_basis`` and ``absence_evidence``.

What each basis means, and how the questions stage chooses one, is in ``tasks/questions/absence.py``;
the balancing, the release checks and the review exports read the names from here.
"""

from __future__ import annotations

import json

from reasonvqa import sources

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


# the hallucination share's stated exemption (tasks/balance/hallucination_share.py; the card says it)
EXEMPT_RULE = ("grounded questions about images of a source whose regions carry no class label (SA-1B masks) "
               "are outside the share: no absence can be claimed there, so no hallucination question is made")


def unlabeled_source_kinds() -> list[str]:
    """The registered source kinds whose regions carry no class label (``Source.unlabeled_regions``)."""
    return [kind for kind in sources.kinds() if sources.source_class(kind).unlabeled_regions]
