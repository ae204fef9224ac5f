"""Wrong-attribute hallucination questions (VistaQA 3.2 "absent attributes", GroundingME 3.2).

"What is the blue car made of?" -> "There is no blue car in the image.", where the
image has one car, annotated white:

1. Subject: a labeled region whose label no other region of the image has (singular and plural
   forms count as the same label), with an annotated attribute of a family of
   templates/grounded/wrong_attributes.yaml (colour, material, size, shape). A family the object
   has no value of is unknown, not absent: no question about it.
2. The wrong attribute is the first word of a group of the family. Only families whose words real
   questions use to name a region (grounded.attribute_words: colour, material) are asked, and the groups
   are drawn in proportion to how many other regions of the image carry them (a weighted stable hash
   order of (region, family); groups no other region carries follow in a plain hash order), so the wrong
   words are as common as the words real references use ("the white car" far more than "the purple car")
   and the text alone does not tell them apart. It is rejected ``attribute_present`` when a word of its group (or a plural
   form) is a whole word of any attribute of the subject or of a box duplicating it (IoU at least
   ``duplicate_iou``, another annotation of the same thing); the next group is examined until
   one is kept (at most one question per region and family).
3. Forms as the absent-object questions (hallucination.forms) about "<attribute> <label>" but no
   counting (real questions never count "blue cars"); the attribute form asks the other family ("What
   is the blue car made of?"), as real attribute questions name a region by one family and ask the other.
4. Basis (``absence_basis``): ``annotated_attribute``, the subject's annotated values of the family (in
   ``absence_evidence``) contradict the asked word.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from reasonvqa.yaml_files import load_yaml
from reasonvqa.absence_bases import ATTRIBUTE_BASIS
from reasonvqa.paths import TEMPLATES_DIR
from reasonvqa.tasks.questions.grounded import (Candidate, attribute_words, be, pick_form, plural, singular,
                                                stable_order)
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.hallucination import lazy_forms, words
from reasonvqa.tasks.questions.regions import Region, iou_matrix

FAMILIES_FILE = TEMPLATES_DIR / "grounded" / "wrong_attributes.yaml"
TEMPLATE_ID = "hallucination:wrong_attribute"


@lru_cache(maxsize=1)
def attribute_families() -> dict[str, tuple[tuple[str, ...], ...]]:
    """family -> its groups of words for the same thing, from templates/grounded/wrong_attributes.yaml."""
    data = load_yaml(FAMILIES_FILE.read_text(encoding="utf-8"))
    return {family: tuple(tuple(str(w).lower() for w in group) for group in groups) for family, groups in sorted(data.items())}


def _carries(attributes: list[str], group: tuple[str, ...]) -> bool:
    """True when some attribute holds a word of ``group`` (or its plural) as whole words."""
    return _carries_words(tuple(attributes), group)


@lru_cache(maxsize=1 << 16)  # asked for every other region of the image per group: few distinct attribute lists
def _carries_words(attributes: tuple[str, ...], group: tuple[str, ...]) -> bool:
    texts = [words(a) for a in attributes]
    return any(words(form) in t for w in group for form in (w, plural(w)) for t in texts)


def known_families(attributes: list[str]) -> list[str]:
    """The families of which ``attributes`` hold a value."""
    return [f for f, groups in attribute_families().items() if any(_carries(attributes, g) for g in groups)]


def drawn_groups(region_id: str, family: str, others: list[Region]) -> list[tuple[str, ...]]:
    """The family's groups in a stable order weighted by how many of ``others`` carry each (weighted sampling
    without replacement by hash keys), then the groups none carries in a stable hash order."""
    def key(group: tuple[str, ...]) -> tuple[int, float]:
        weight = sum(_carries(o.attributes, group) for o in others)
        u = (int(stable_order(region_id, family, group[0]), 16) + 1) / 2 ** 64
        return (0, -math.log(u) / weight) if weight else (1, u)

    return sorted(attribute_families()[family], key=key)


def attribute_candidates(image_id: str, regions: list[Region], refs: dict[str, str],
                         config: GroundedConfig, weights: dict[str, int] | None = None) -> list[Candidate]:
    """Wrong-attribute hallucination candidates of one image (kept ones and rejects)."""
    if config.hallucination_candidates_per_image == 0:
        return []
    labeled = [r for r in regions if r.label]
    same: dict[str, list[Region]] = {}
    for r in labeled:
        same.setdefault(singular(r.label), []).append(r)
    named = sorted(ref for r in labeled if (ref := refs.get(r.region_id)) == f"the {r.label}")
    naming = attribute_words()
    out: list[Candidate] = []
    kept = 0
    index = {r.region_id: i for i, r in enumerate(labeled)}
    duplicate: np.ndarray | None = None  # IoU >= duplicate_iou between labeled regions, when a subject needs it
    for r in sorted(labeled, key=lambda r: stable_order(r.region_id, "attribute")):
        if kept >= config.hallucination_candidates_per_image:
            break
        assert r.label is not None  # labeled regions only
        if len(same[singular(r.label)]) != 1 or refs.get(r.region_id) != f"the {r.label}":
            continue
        if duplicate is None:
            duplicate = iou_matrix(labeled) >= config.duplicate_iou
        i = index[r.region_id]
        carried = [a for j, o in enumerate(labeled) if j == i or duplicate[i, j] for a in o.attributes]
        others = [n for n in named if n != f"the {r.label}"]
        others_regions = [o for j, o in enumerate(labeled) if j != i and not duplicate[i, j]]
        for family in known_families(r.attributes):
            if not any(w in naming for group in attribute_families()[family] for w in group):
                continue  # real questions never name a region by this family (size, shape)
            groups = drawn_groups(r.region_id, family, others_regions)
            for group in groups:
                wrong = group[0]
                phrase = f"{wrong} {r.label}"
                asked = "material" if family == "color" else "color"
                options = [f for f in lazy_forms(phrase, others, attribute=asked, key=(image_id, r.region_id, wrong),
                                                 counting=False) if f[0] in config.task_types]
                if not options:
                    break
                task, form, write = pick_form(options, weights, image_id, r.region_id, wrong, "form")
                question = write()
                answer = f"There {be(r.label)} no {phrase} in the image."
                annotated = sorted(a for a in r.attributes if any(_carries([a], g) for g in attribute_families()[family]))
                c = Candidate(image_id, task, question, answer, [], is_hallucination=True, template_id=TEMPLATE_ID,
                              detail={"subject": r.region_id, "family": family, "attribute": wrong,
                                      "absence_basis": ATTRIBUTE_BASIS,
                                      "absence_evidence": {"subject": r.region_id, "family": family,
                                                           "annotated": annotated}}, form=form)
                out.append(c)
                if _carries(carried, group):
                    c.reason = "attribute_present"
                    continue
                kept += 1
                break
    return out
