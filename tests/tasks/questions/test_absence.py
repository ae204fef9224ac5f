"""Absence claims with a basis: exhaustive taxonomies, co-occurrence estimates below a threshold, unbased choices,
and the basis of every hallucination form (literal corpora in the corpus-labels format)."""

from __future__ import annotations

import json

import pyarrow as pa

from reasonvqa.absence_bases import BASES
from reasonvqa.tasks.questions.absence import absent_labels, corpus_taxonomies
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.grounded_shard import generate_grounded
from reasonvqa.tasks.questions.regions import image_labels, shard_regions

from tests.tasks.questions.test_grounded import ATTRIBUTES, CORPUS_EXTRA, IMAGES, OBJECTS, SOURCE_REGIONS


def corpus(labels: dict[str, list[str]]) -> pa.Table:
    return pa.table({"image_id": [i for i, ls in labels.items() for _ in ls], "label": [x for ls in labels.values() for x in ls]})


# a nuScenes frame with a car; Visual Genome street scenes where cars come with sidewalks and buildings
STREET = corpus({"nuscenes:f1": ["car"], "nuscenes:f2": ["car", "pedestrian", "truck"],
                 "vg:1": ["car", "sidewalk", "building"], "vg:2": ["car", "sidewalk", "building", "tree"]})


def test_nuscenes_claims_absent_only_its_own_classes():
    taxonomies = corpus_taxonomies(STREET, {"nuscenes": None})
    assert taxonomies == {"nuscenes": ["car", "pedestrian", "truck"]}
    found = absent_labels(STREET, ["nuscenes:f1"], 5, taxonomies, 0.05)["nuscenes:f1"]
    assert [(c.label, c.basis) for c in found] == [("pedestrian", "taxonomy"), ("truck", "taxonomy")]
    assert found[0].evidence == {"taxonomy": "nuscenes", "classes": 3}
    # the Visual Genome images are not covered: their most co-occurring absent labels come without a basis
    vg = absent_labels(STREET, ["vg:1"], 5, taxonomies, 0.05)["vg:1"]
    assert {c.basis for c in vg} == {None} and "pedestrian" in {c.label for c in vg}


def test_a_declared_taxonomy_limits_what_may_be_absent():
    taxonomies = corpus_taxonomies(STREET, {"vg": ["car", "dog", "bicycle"]})
    found = absent_labels(STREET, ["vg:1", "vg:2"], 5, taxonomies, 0.05)
    assert {i: [(c.label, c.basis) for c in cs] for i, cs in found.items()} == {
        "vg:1": [("bicycle", "taxonomy"), ("dog", "taxonomy")], "vg:2": [("bicycle", "taxonomy"), ("dog", "taxonomy")]}


def _scenes(n: int) -> dict[str, list[str]]:
    """``n`` kitchens sharing "cup" with vg:0; half of them hold a "plate"; two savannah images hold giraffes."""
    scenes = {"vg:0": ["cup", "table"]}
    scenes.update({f"vg:k{i}": ["cup", "sink"] + (["plate"] if i % 2 else []) for i in range(n)})
    scenes.update({"vg:s1": ["giraffe", "grass"], "vg:s2": ["giraffe", "grass"]})
    return scenes


def test_an_improbable_label_has_the_cooccurrence_basis_with_its_estimate():
    found = absent_labels(corpus(_scenes(30)), ["vg:0"], 10, {}, 0.05)["vg:0"]
    by_label = {c.label: c for c in found}
    giraffe = by_label["giraffe"]
    assert giraffe.basis == "cooccurrence"
    assert giraffe.evidence["scenes"] == 30 and giraffe.evidence["with_label"] == 0
    assert giraffe.evidence["probability"] == round(1 / 32, 6) and giraffe.evidence["threshold"] == 0.05
    assert by_label["grass"].basis == "cooccurrence"
    # held by 15 of the 30 kitchens: the most co-occurring, hence the likeliest to be there unannotated
    assert by_label["plate"].basis is None and by_label["sink"].basis is None


def test_images_taken_a_few_at_a_time_get_the_same_claims(monkeypatch):
    # the co-occurrence join is bounded by absence.ROW_BUDGET rows: one image per step here, all at once by default
    scenes = corpus(_scenes(30))
    images = ["vg:0", "vg:k1", "vg:k2", "vg:s1"]
    whole = absent_labels(scenes, images, 10, {"vg": ["plate", "giraffe", "dog"]}, 0.05)
    whole_unbased = absent_labels(scenes, images, 10, {}, 0.05)
    monkeypatch.setattr("reasonvqa.tasks.questions.absence.ROW_BUDGET", 1)
    assert absent_labels(scenes, images, 10, {"vg": ["plate", "giraffe", "dog"]}, 0.05) == whole
    stepped = absent_labels(scenes, images, 10, {}, 0.05)
    assert stepped == whole_unbased and set(stepped) == {"vg:0", "vg:k1", "vg:k2"}
    assert [[(c.label, c.basis, c.evidence) for c in stepped[i]] for i in stepped] == [
        [(c.label, c.basis, c.evidence) for c in whole_unbased[i]] for i in stepped]
    assert {c.label: c.basis for c in stepped["vg:0"]}["giraffe"] == "cooccurrence"


def test_few_scenes_cannot_back_an_improbability():
    found = absent_labels(corpus(_scenes(3)), ["vg:0"], 10, {}, 0.05)["vg:0"]
    assert {c.basis for c in found} == {None}  # (0 + 1) / (3 + 2) = 0.2 is not below 0.05
    found = absent_labels(corpus(_scenes(3)), ["vg:0"], 10, {}, 0.25)["vg:0"]
    assert {c.label for c in found if c.basis == "cooccurrence"} == {"giraffe", "grass"}


def test_every_hallucination_row_names_its_basis():
    regions = shard_regions(OBJECTS, ATTRIBUTES, SOURCE_REGIONS)
    labels = pa.concat_tables([image_labels(OBJECTS, regions), CORPUS_EXTRA,
                               corpus({"vg:103": ["car", "sidewalk", "building"], "nuscenes:cam2": ["car", "pedestrian"]})])
    taxonomies = corpus_taxonomies(labels, {"nuscenes": None})
    result = generate_grounded(IMAGES, OBJECTS, ATTRIBUTES, regions, labels, GroundedConfig(), 0, taxonomies=taxonomies)
    rows = [q for q in result.outputs["questions"].to_pylist() if q["is_hallucination"]]
    by_form: dict[str, set] = {}
    for q in rows:
        by_form.setdefault(q["template_ids"][0], set()).add(q["absence_basis"])
        assert q["absence_basis"] is None or q["absence_basis"] in BASES
        assert (q["absence_evidence"] is None) == (q["absence_basis"] is None)
    assert by_form["hallucination:absent_object"] == {"taxonomy", None}
    assert by_form["hallucination:wrong_attribute"] == {"annotated_attribute"}
    assert by_form["hallucination:impossible_relation"] <= {"refuting_boxes", "annotated_relation"}
    nuscenes = [q for q in rows if q["image_id"] == "nuscenes:cam1"]
    assert [q["absence_basis"] for q in nuscenes] == ["taxonomy"] and "pedestrian" in nuscenes[0]["answer"]
    assert not any("sidewalk" in q["question"] or "building" in q["question"] for q in nuscenes)
    attribute = next(q for q in rows if q["template_ids"] == ["hallucination:wrong_attribute"])
    evidence = json.loads(attribute["absence_evidence"])
    assert evidence["family"] in ("color", "material") and evidence["annotated"] and evidence["subject"].startswith("vg:7/g")
    # the unbased ones are all Visual Genome absent objects (not exhaustive there)
    assert {q["image_id"] for q in rows if q["absence_basis"] is None} == {"vg:7"}
