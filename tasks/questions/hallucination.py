"""Hallucination-aware questions (VistaQA 3.1-3.2, GroundingME 3.2 rejection samples).

A question about an object that co-occurs with this scene elsewhere in the corpus but is absent
here; its answer states the absence, its evidence is empty and ``is_hallucination`` is true.

1. Absent labels and their basis (absence.py ``absent_labels``): classes of an exhaustive taxonomy
   (nuScenes), labels improbable for the scene by corpus co-occurrence, and the most co-occurring
   labels (unbased: likely present but unannotated; set aside until a review confirms them).
2. Absence check per candidate against every label and object name of the image, whole-word in
   both directions ("car" is not absent from an image with a "car door"; ``not_absent``), and the
   image must have no region without a label (SA-1B masks may show anything; no candidate is made).
3. The question takes one of the task-type forms (counting, attribute, spatial, comparison,
   identification) chosen by a stable hash; forms that need a named present object use one.
4. Share: every valid candidate (at most ``hallucination_candidates_per_image`` per basis) goes to the pool;
   after answer balancing, tasks/balance/hallucination_share.py keeps ``balance.hallucination_share``
   (default 27%) of the kept grounded questions.
"""

from __future__ import annotations

import re
from collections import Counter

from reasonvqa.tasks.questions.absence import AbsentLabel
from reasonvqa.tasks.questions.grounded import Candidate, be, plural, references, singular, stable_order
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.regions import Region

TEMPLATE_ID = "hallucination:absent_object"


def words(text: str) -> str:
    """`` a b `` : the lower-case words of ``text`` between single spaces (for whole-word containment)."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def is_absent(label: str, present: set[str]) -> bool:
    """True when no present label contains ``label`` (or its plural) as whole words, or is contained in it."""
    forms = {words(label), words(plural(label)), words(singular(label))}
    for p in present:
        wp = words(p)
        if any(f in wp or wp in f for f in forms):
            return False
    return True


def forms(absent: str, named: list[str], attribute: str = "color") -> list[tuple[str, str]]:
    """(task type, question) forms of a hallucination question about ``absent``; ``named`` are
    phrases of present, uniquely named objects; ``attribute`` (color or material) is what the
    attribute form asks."""
    asked = (f"What color {be(absent)} the {absent}?" if attribute == "color"
             else f"What {be(absent)} the {absent} made of?")
    out = [("counting", f"How many {plural(absent)} are there in the image?"),
           ("attribute", asked),
           ("identification", f"What is the object next to the {absent}?")]
    if named:
        out += [("spatial", f"Is the {absent} to the left or to the right of {named[0]}?"),
                ("comparison", f"Which appears larger in the image, the {absent} or {named[0]}?")]
    return out


def hallucination_candidates(image_id: str, regions: list[Region], labels: set[str], absent: list[AbsentLabel],
                             config: GroundedConfig) -> list[Candidate]:
    """Up to ``hallucination_candidates_per_image`` questions per basis about absent objects of one image."""
    refs = references(regions)
    named = sorted(ref for r in regions if (ref := refs.get(r.region_id)) and r.label and ref == f"the {r.label}")
    out: list[Candidate] = []
    kept: Counter = Counter()
    for choice in absent:
        label = choice.label
        if kept[choice.basis] >= config.hallucination_candidates_per_image:
            continue
        options = [f for f in forms(label, named) if f[0] in config.task_types]
        if not options:
            continue
        task, question = options[int(stable_order(image_id, label, "form"), 16) % len(options)]
        answer = f"There are no {plural(label)} in the image." if task == "counting" else f"There {be(label)} no {label} in the image."
        c = Candidate(image_id, task, question, answer, [], is_hallucination=True, template_id=TEMPLATE_ID,
                      detail={"absent": label, "absence_basis": choice.basis, "absence_evidence": choice.evidence})
        if not is_absent(label, labels):
            c.reason = "not_absent"
        else:
            kept[choice.basis] += 1
        out.append(c)
    return out

