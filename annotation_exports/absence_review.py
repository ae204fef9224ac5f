"""A reviewer's confirmation of an absence claim becomes the claim's basis (``review``, tasks/questions/absence.py).

A hallucination question set aside for want of a basis (``no_absence_basis``; e.g. the most
co-occurring absent label of a Visual Genome image) is exported for review (``reasonvqa export
--absence-basis none``); a winning ``correct`` decision on it (the thing is indeed absent) sets
``absence_basis`` to ``review`` and ``absence_evidence`` to the decision, so the next release
(``reasonvqa resplit --decisions``) takes it. A ``wrong`` decision drops the question (apply.py).
Only a weaker basis is replaced: an exhaustive taxonomy stays the row's basis.
"""

from __future__ import annotations

import pyarrow as pa

from reasonvqa.absence_bases import BASES, evidence_text

REVIEW_BASIS = "review"
_REPLACED = (None, *BASES[BASES.index(REVIEW_BASIS) + 1:])  # bases weaker than a review


def review_bases(questions: pa.Table, decisions: dict[str, dict]) -> pa.Table:
    """``questions`` with basis ``review`` on the hallucination rows a ``correct`` decision confirms."""
    confirmed = {q: d for q, d in decisions.items() if d["action"] == "correct"}
    if not confirmed or "is_hallucination" not in questions.column_names:
        return questions
    for name in ("absence_basis", "absence_evidence"):
        if name not in questions.column_names:
            questions = questions.append_column(name, pa.nulls(questions.num_rows, pa.string()))
    ids = questions["question_id"].to_pylist()
    halluc = questions["is_hallucination"].to_pylist()
    basis = questions["absence_basis"].to_pylist()
    evidence = questions["absence_evidence"].to_pylist()
    changed = False
    for i, qid in enumerate(ids):
        d = confirmed.get(qid)
        if d is None or not halluc[i] or basis[i] not in _REPLACED:
            continue
        evidence[i] = evidence_text({"decision_id": d["decision_id"], "annotator": d.get("annotator"),
                                     "time": d.get("time"), "replaces": basis[i]})
        basis[i] = REVIEW_BASIS
        changed = True
    if not changed:
        return questions
    for name, values in (("absence_basis", basis), ("absence_evidence", evidence)):
        index = questions.column_names.index(name)
        questions = questions.set_column(index, name, pa.array(values, questions.schema.field(index).type))
    return questions
