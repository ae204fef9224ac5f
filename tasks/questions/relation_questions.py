"""Real questions about annotated relations, in the forms impossible-relation questions take.

"How many cups are on the table?" -> "1" and "What color is the cup on the table?" -> "white", where
Visual Genome annotates "cup on table" between the only cup of the image and a named table. They
are the real counterparts of hallucination_relation.py's forms (same wording, same predicates), so a
reader of the question alone cannot tell a real relation from an impossible one.

Relations come from the annotation (any askable predicate; the subject's label unique in the image,
so the count is 1) and from the boxes (``shown_relations``): "How many cars are to the left of the
bus?" counts the instances of the class that the boxes put left of the bus by the spatial margin
(the test that refutes those predicates in impossible-relation questions), asked only where no
instance lies within the margin; the count and its evidence are those instances.

Rules: the object is any named labeled region of another label; an annotated predicate is one a
question may ask (templates/grounded/relations.yaml) and the boxes must not refute it
(hallucination_relation.geometry_refutes), else ``relation_refuted_by_boxes``. The colour form needs
a single subject instance with exactly one annotated colour. Pairs in a stable hash order, at
most ``max_pairs_per_image`` kept per image; the form is drawn by a stable hash.
"""

from __future__ import annotations

import itertools

from reasonvqa.tasks.questions.grounded import (Candidate, attribute_words, pick, singular, stable_order,
                                                subject_regions)
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.hallucination_relation import (askable, families, geometry_refutes, normalize_predicate,
                                                              relation_forms)
from reasonvqa.tasks.questions.regions import Region, box_iou, object_region_id, side_masks


def relation_questions(regions: list[Region], refs: dict[str, str], relations: list[dict], image: dict,
                       config: GroundedConfig) -> list[Candidate]:
    """Counting and colour questions about annotated and shown relations of one image (kept ones and rejects)."""
    if not {"counting", "attribute"} & set(config.task_types):
        return []
    by_id = {r.region_id: r for r in regions}
    label_count: dict[str, int] = {}
    for r in subject_regions(regions):
        label_count[singular(r.label)] = label_count.get(singular(r.label), 0) + 1
    ask = askable()
    found: dict[tuple[str, str, str], tuple[Region, Region]] = {}
    for rel in relations:
        a, b = by_id.get(object_region_id(rel["subject_id"])), by_id.get(object_region_id(rel["object_id"]))
        predicate = normalize_predicate(rel["predicate"])
        if a is None or b is None or predicate not in ask or not b.label or b.region_id not in refs or a.label == b.label:
            continue
        if not a.subject or label_count.get(singular(a.label)) != 1 or refs.get(a.region_id) != f"the {a.label}":
            continue
        found[(a.region_id, b.region_id, predicate)] = (a, b)
    annotated = _questions({k: ([a], b) for k, (a, b) in found.items()}, refs, image, config, "annotated relation",
                           config.max_pairs_per_image)
    return annotated + _questions(shown_relations(regions, refs, image, config), refs, image, config, "shown relation",
                                  max(config.max_pairs_per_image, config.hallucination_candidates_per_image))


def shown_relations(regions: list[Region], refs: dict[str, str], image: dict,
                    config: GroundedConfig) -> dict[tuple[str, str, str], tuple[list[Region], Region]]:
    """(class, object region, predicate) -> (the instances of the class the boxes put there, the object region),
    for the spatial predicates where every instance of the class is clearly on one side of the object (none
    within the margin) and at least one is on the side asked; one predicate per (class, object), by a stable hash."""
    width, height = image.get("width") or 0, image.get("height") or 0
    by_label: dict[str, list[Region]] = {}
    for r in subject_regions(regions):
        assert r.label is not None  # subject regions are labeled
        by_label.setdefault(r.label, []).append(r)
    out: dict[tuple[str, str, str], tuple[list[Region], Region]] = {}
    if not by_label:
        return out
    row = {r.region_id: i for i, r in enumerate(regions)}
    clear = side_masks(regions, config.spatial_margin * width, config.spatial_margin * height)
    for label, instances in sorted(by_label.items()):
        if len(instances) > config.max_count or any(box_iou(x, y) >= config.duplicate_iou
                                                    for x, y in itertools.combinations(instances, 2)):
            continue
        rows = [row[a.region_id] for a in instances]
        axes = []  # per axis: its two sides, and per object region whether each instance is on either side
        for first, second in (("left", "right"), ("above", "below")):
            on_first, on_second = clear[first][rows], clear[second][rows]
            known = (on_first | on_second).all(axis=0)  # every instance clearly on one side along this axis
            axes.append((first, second, known.tolist(), on_first.T.tolist(), on_second.T.tolist()))
        for j, b in enumerate(regions):
            if not b.label or b.region_id not in refs or b.label == label:
                continue
            held = {}
            for first, second, known, firsts, seconds in axes:
                if known[j]:
                    for side, on in ((first, firsts[j]), (second, seconds[j])):
                        if any(on):
                            held[_SPATIAL[side]] = [a for a, there in zip(instances, on) if there]
            if held:
                predicate = pick(sorted(held), label, b.region_id, "shown relation")
                out[(label, b.region_id, predicate)] = (held[predicate], b)
    return out


_SPATIAL = {"left": "to the left of", "right": "to the right of", "above": "above", "below": "below"}


def _questions(found: dict[tuple[str, str, str], tuple[list[Region], Region]], refs: dict[str, str], image: dict,
               config: GroundedConfig, salt: str, cap: int) -> list[Candidate]:
    """At most ``cap`` kept questions, one per (subject, object), in a stable hash order of the keys. The count is
    the number of subject instances in the relation; the colour form needs a single one with a single colour."""
    ask, fams, colors = askable(), families(), attribute_words()
    out, kept, pairs = [], 0, set()
    for key in sorted(found, key=lambda k: stable_order(*k, salt)):
        if kept >= cap:
            break
        subjects, b = found[key]
        predicate = key[2]
        if (key[0], b.region_id) in pairs:
            continue
        a = subjects[0]
        assert a.label is not None  # a subject is named "the <label>" (annotated) or a subject region (shown)
        values = sorted(v for v in a.attributes if colors.get(v) == "color")
        forms = [f for f in relation_forms(a.label, predicate, refs[b.region_id])
                 if f[0] in config.task_types and (f[0] != "attribute" or (len(subjects) == 1 and len(values) == 1))]
        if not forms:
            continue
        task, form, question = pick(forms, *key, "form")
        answer = str(len(subjects)) if task == "counting" else values[0]
        evidence = [s.region_id for s in subjects] if task == "counting" else [a.region_id, b.region_id]
        c = Candidate(a.image_id, task, question, answer, evidence, detail={"predicate": predicate, "object": b.region_id},
                      form=form)
        if any(geometry_refutes(fams[ask[predicate]], s, b, image, config) for s in subjects):
            c.reason = "relation_refuted_by_boxes"
        else:
            kept += 1
            pairs.add((key[0], b.region_id))
        out.append(c)
    return out
