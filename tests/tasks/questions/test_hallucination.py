"""Hallucination questions built without a VLM: wrong attributes and impossible relations, on a literal
Visual Genome scene in the record model (objects, attributes, relations as the VG reader writes them)."""

from __future__ import annotations

import pytest

from reasonvqa import schemas
from reasonvqa.tasks.questions.grounded import references
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.grounded_shard import generate_grounded
from reasonvqa.tasks.questions.hallucination_attribute import attribute_candidates, attribute_families
from reasonvqa.tasks.questions.hallucination_relation import (corpus_relation_counts, predicate_index,
                                                              predicates_elsewhere, relation_candidates)
from reasonvqa.tasks.questions.regions import Region, image_labels, regions_by_image, shard_regions

IMAGES = schemas.from_rows([dict(image_id="vg:8", source="vg", source_image_id="8", width=800, height=600)], schemas.IMAGES)


# WordNet 3.0 synsets as Visual Genome gives them (the class label is the lemma); the bird has none (no_synset)
SYNSETS = {"man": "man.n.01", "horse": "horse.n.01", "umbrella": "umbrella.n.01", "table": "table.n.02", "cup": "cup.n.01",
           "car": "car.n.01", "bench": "bench.n.01", "tree": "tree.n.01", "dog": "dog.n.01", "person": "person.n.01",
           "vehicle": "vehicle.n.01", "building": "building.n.01", "kite": "kite.n.03",
           "signboard": "signboard.n.01"}


def obj(native, label, box, image="vg:8"):
    x, y, w, h = box
    return dict(object_id=f"{image}/o{native}", image_id=image, label=label, names=[label], x=x, y=y, w=w, h=h,
                origin="annotation:vg", synset=SYNSETS.get(label), synsets=[SYNSETS[label]] if label in SYNSETS else [])


OBJECTS = schemas.from_rows([
    obj(1, "man", (100, 100, 80, 200)),
    obj(2, "horse", (80, 200, 160, 150)),
    obj(3, "umbrella", (600, 50, 100, 60)),
    obj(4, "table", (300, 400, 200, 100)),
    obj(5, "cup", (350, 370, 30, 30)),
    obj(6, "car", (550, 420, 200, 120)),
    obj(7, "bench", (20, 520, 150, 60)),
    obj(8, "tree", (400, 10, 100, 250)),
    obj(9, "signboard", (700, 300, 40, 40)),
    obj(10, "dog", (250, 300, 40, 30)),
    obj(11, "dog", (200, 330, 40, 30)),
    obj(12, "person", (101, 101, 80, 200)),  # the man annotated a second time
    obj(13, "vehicle", (552, 421, 198, 120)),  # the car annotated a second time, grey
    obj(14, "building", (0, 0, 300, 90)),
    obj(15, "kite", (760, 0, 30, 30)),
], schemas.OBJECTS)
ATTRIBUTES = schemas.from_rows([dict(object_id=f"vg:8/o{n}", image_id="vg:8", attribute=a) for n, a in [
    (6, "white"), (6, "parked"), (7, "wooden"), (7, "Brown"), (8, "dark green"), (8, "tall"), (10, "black"),
    (11, "brown"), (13, "grey"), (14, "made of bricks"), (14, "red"), (15, "big"), (15, "tiny"),
]], schemas.ATTRIBUTES)


def rel(native, subject, predicate, obj_, image="vg:8"):
    labels = {o["object_id"]: o["label"] for o in OBJECTS.to_pylist()}
    s, o = f"{image}/o{subject}", f"{image}/o{obj_}"
    return dict(relation_id=f"{image}/r{native}", image_id=image, subject_id=s, object_id=o, predicate=predicate,
                subject_label=labels.get(s), object_label=labels.get(o))


RELATIONS = schemas.from_rows([
    rel(1, 1, "riding", 2),
    rel(2, 5, "ON", 4),
    rel(3, 12, "holding", 3),  # the duplicate man holds the umbrella (the boxes disagree: annotation noise)
    rel(4, 7, "in front of", 8),
], schemas.RELATIONS)


def other(image, triples):
    return [dict(relation_id=f"{image}/r{n}", image_id=image, subject_id=f"{image}/o{2 * n}",
                 object_id=f"{image}/o{2 * n + 1}", predicate=p, subject_label=s, object_label=o)
            for n, (s, p, o) in enumerate(triples)]


# other images of the corpus: predicates used between the same labels elsewhere
CORPUS_RELATIONS = schemas.from_rows(
    other("vg:200", [("man", "holding", "umbrella"), ("cup", "under", "table"), ("man", "riding", "horse")])
    + other("vg:201", [("bench", "behind", "tree"), ("signboard", "in front of", "car"), ("cup", "on", "table")])
    + other("vg:202", [("man", "Holding", "umbrella"), ("man", "has", "horse"), ("horse", "near", "car")]),
    schemas.RELATIONS)
CONFIG = GroundedConfig(hallucination_candidates_per_image=500)  # no cap: every pair is examined


@pytest.fixture(scope="module")
def scene():
    regions = shard_regions(OBJECTS, ATTRIBUTES, None)
    by_id = {r.region_id: r for r in regions_by_image(regions)["vg:8"]}
    return regions, by_id


def relation_run(scene, config=CONFIG):
    regions, by_id = scene
    rs = list(by_id.values())
    index = predicate_index(corpus_relation_counts([RELATIONS, CORPUS_RELATIONS]), {r.label for r in rs})
    return relation_candidates("vg:8", rs, references(rs), RELATIONS.to_pylist(), index,
                               {"width": 800, "height": 600}, config)


def test_corpus_counts_images_per_askable_predicate_and_leaves_this_image_out():
    counts = corpus_relation_counts([RELATIONS, CORPUS_RELATIONS]).to_pylist()
    by_key = {(r["subject_label"], r["predicate"], r["object_label"]): r["images"] for r in counts}
    assert by_key[("man", "holding", "umbrella")] == 2  # "Holding" normalized; one image counts once
    assert by_key[("man", "riding", "horse")] == 2  # this image and vg:200
    assert ("man", "has", "horse") not in by_key and ("horse", "near", "car") not in by_key  # not askable
    index = predicate_index(corpus_relation_counts([RELATIONS, CORPUS_RELATIONS]), {"man", "cup"})
    own = {("man", "riding", "horse"), ("cup", "on", "table")}
    assert predicates_elsewhere(index, own, "cup", "table") == ["on", "under"]
    alone = predicate_index(corpus_relation_counts([RELATIONS]), {"man"})
    assert predicates_elsewhere(alone, own, "man", "horse") == []  # only this image rides: not "elsewhere"
    assert predicates_elsewhere(index, own, "bench", "tree") == []  # bench is not among the wanted subjects


def test_kept_relations_do_not_hold_by_geometry_or_an_exclusive_annotation(scene):
    _, by_id = scene
    found = relation_run(scene)
    kept = [c for c in found if c.reason is None]
    assert kept and all(c.is_hallucination and c.evidence == [] and c.template_id == "hallucination:impossible_relation"
                        for c in kept)
    annotated = {(r["subject_id"].replace("/o", "/g"), r["object_id"].replace("/o", "/g")): r["predicate"].lower()
                 for r in RELATIONS.to_pylist()}
    for c in kept:
        a, b, p = by_id[c.detail["subject"]], by_id[c.detail["object"]], c.detail["predicate"]
        assert annotated.get((a.region_id, b.region_id)) != p
        assert f"No {a.label} is {p} " in c.answer and c.answer.endswith(" in the image.")
        if annotated.get((a.region_id, b.region_id)) == "on" and p in ("under", "below", "beneath", "underneath"):
            continue  # annotated "cup ON table" excludes "under"
        if p in ("under", "below"):
            assert a.bottom + 12 <= b.y  # 2% of 600 px: the subject lies above the object
        elif p in ("above", "on"):
            assert a.y >= b.bottom + 12 or a.x >= b.right + 16 or b.x >= a.right + 16
        elif p == "to the left of":
            assert a.x >= b.right + 16
        elif p == "to the right of":
            assert a.right + 16 <= b.x
        elif p == "behind":
            assert annotated[(a.region_id, b.region_id)] == "in front of"
        else:
            assert p in ("holding", "riding", "wearing"), p
            assert a.x >= b.right + 16 or b.x >= a.right + 16 or a.y >= b.bottom + 12 or b.y >= a.bottom + 12
    asked = {(c.detail["subject"], c.detail["predicate"], c.detail["object"]) for c in kept}
    assert ("vg:8/g7", "behind", "vg:8/g8") in asked  # annotated "bench in front of tree" excludes "behind"


def test_relations_that_hold_or_are_not_refuted_are_rejected_with_their_reason(scene):
    found = {(c.detail["subject"], c.detail["predicate"], c.detail["object"]): c for c in relation_run(scene)}
    assert found[("vg:8/g5", "on", "vg:8/g4")].reason == "relation_present"  # annotated "cup ON table"
    assert found[("vg:8/g1", "riding", "vg:8/g2")].reason == "relation_present"
    # the man is far from the umbrella, but his duplicate box is annotated holding it: conservative
    assert found[("vg:8/g1", "holding", "vg:8/g3")].reason == "relation_present"
    # nothing says the signboard is not in front of the car, and 2D boxes cannot tell
    assert found[("vg:8/g9", "in front of", "vg:8/g6")].reason == "relation_not_refuted"
    # the cup's box touches the table's, so the boxes cannot refute "under", but the annotated "ON" does
    assert found[("vg:8/g5", "under", "vg:8/g4")].reason is None
    # the forms real relation questions take too (relation_questions.py)
    assert found[("vg:8/g5", "under", "vg:8/g4")].question in {
        "How many cups are under the table?", "What color is the cup under the table?"}
    # the dogs are two: "no dog is ..." cannot be claimed about one of them
    assert not any(c.detail["subject"] in ("vg:8/g10", "vg:8/g11") for c in found.values())


def test_wrong_attributes_are_absent_from_every_object_of_the_label(scene):
    _, by_id = scene
    rs = list(by_id.values())
    found = attribute_candidates("vg:8", rs, references(rs), CONFIG)
    kept = [c for c in found if c.reason is None]
    assert kept and all(c.template_id == "hallucination:wrong_attribute" and c.evidence == [] for c in kept)
    groups = {w: g for groups in attribute_families().values() for g in groups for w in g}
    for c in kept:
        subject = by_id[c.detail["subject"]]
        wrong = c.detail["attribute"]
        assert f"{wrong} " in c.question and c.answer.startswith("There ") and wrong in c.answer
        same = [r for r in rs if r.label == subject.label or r.region_id == subject.region_id]
        duplicates = [r for r in rs if r.region_id in ("vg:8/g13",)] if subject.label == "car" else []
        for r in same + duplicates:
            assert not any(w in a.split() or f"{w}s" in a.split() for a in r.attributes for w in groups[wrong])
    by_subject = {}
    for c in found:
        by_subject.setdefault(c.detail["subject"], []).append(c)
    # the car is white and its duplicate box grey: neither white nor gray/grey/silver is ever asked as wrong
    for c in by_subject["vg:8/g6"]:
        assert (c.reason == "attribute_present") == (c.detail["attribute"] in ("white", "gray") and c.detail["family"] == "color")
    # the building is "made of bricks": brick is present, as is red
    assert all(c.reason == "attribute_present" for c in by_subject["vg:8/g14"]
               if c.detail["attribute"] in ("brick", "red"))
    # "dark green" is green; "tall" is no size word of a family: the tree's size is unknown
    assert {c.detail["family"] for c in by_subject["vg:8/g8"]} == {"color"}
    assert all(c.detail["attribute"] != "green" or c.reason == "attribute_present" for c in by_subject["vg:8/g8"])


def test_objects_without_a_known_value_or_with_a_same_label_neighbour_are_skipped(scene):
    _, by_id = scene
    rs = list(by_id.values())
    subjects = {c.detail["subject"] for c in attribute_candidates("vg:8", rs, references(rs), CONFIG)}
    assert "vg:8/g9" not in subjects and "vg:8/g1" not in subjects  # no attribute: unknown is not absent
    assert not subjects & {"vg:8/g10", "vg:8/g11"}  # two dogs (black, brown): "no white dog" is not asked
    assert {"vg:8/g6", "vg:8/g7", "vg:8/g8", "vg:8/g14"} <= subjects
    assert "vg:8/g15" not in subjects  # the kite has only size values: real questions never name a region by size


def test_wrong_words_are_drawn_as_often_as_other_regions_of_the_image_carry_them():
    from reasonvqa.tasks.questions.hallucination_attribute import drawn_groups

    def region(n, attributes):
        return Region(f"vg:9/g{n}", "vg:9", f"thing{n}", 0, 0, 10, 10, 100, "annotation:vg", attributes=attributes)

    others = [region(1, ["white"]), region(2, ["white"]), region(3, ["black"])]
    firsts = [drawn_groups(f"vg:9/g{n}", "color", others)[0][0] for n in range(200)]
    # the carried groups come first, white about twice as often as black; never a colour no region carries
    assert set(firsts) == {"white", "black"} and 1.4 < firsts.count("white") / firsts.count("black") < 2.8
    order = [g[0] for g in drawn_groups("vg:9/g5", "color", others)]
    assert set(order[:2]) == {"white", "black"} and len(order) == len(set(order)) == 11


def test_the_shard_accounts_for_every_kind_and_records_the_sub_type(scene):
    regions, _ = scene
    corpus = image_labels(OBJECTS, regions)
    result = generate_grounded(IMAGES, OBJECTS, ATTRIBUTES, regions, corpus, CONFIG, 0, relations=RELATIONS,
                               corpus_relations=corpus_relation_counts([RELATIONS, CORPUS_RELATIONS]))
    questions = result.outputs["questions"].to_pylist()
    assert result.rows_in == len(questions) + len(result.rejects)
    reasons = {r["reason"] for r in result.rejects.rows}
    assert {"relation_present", "relation_not_refuted"} <= reasons  # attribute_present: see the wrong-attribute tests
    halluc = [q for q in questions if q["is_hallucination"]]
    assert {q["template_ids"][0] for q in halluc} == {"hallucination:wrong_attribute", "hallucination:impossible_relation"}
    # a real row names a form only where hallucination questions share it (identification by position)
    assert all(q["template_ids"] in (None, ["grounded:identify_position"]) for q in questions if not q["is_hallucination"])
    assert result.extra["hallucination"] == len(halluc)
    assert len({(q["image_id"], q["question"]) for q in questions}) == len(questions)
    again = generate_grounded(IMAGES, OBJECTS, ATTRIBUTES, regions, corpus, CONFIG, 0, relations=RELATIONS,
                              corpus_relations=corpus_relation_counts([CORPUS_RELATIONS, RELATIONS]))
    assert again.outputs["questions"].equals(result.outputs["questions"])
    assert again.rejects.rows == result.rejects.rows


def test_task_types_and_the_per_image_cap_limit_the_candidates(scene):
    few = relation_run(scene, GroundedConfig(hallucination_candidates_per_image=2))
    assert sum(c.reason is None for c in few) == 2
    counting_only = relation_run(scene, GroundedConfig(task_types=["counting"], hallucination_candidates_per_image=50))
    assert counting_only and all(c.task_type == "counting" and c.question.startswith("How many ") for c in counting_only)
    assert relation_run(scene, GroundedConfig(task_types=["ocr"])) == []
