"""Absence claims with a basis: exhaustive taxonomies, co-occurrence estimates below a threshold, unbased choices,
and the basis of every hallucination form (literal corpora in the corpus-labels format)."""

from __future__ import annotations

import json
import random
from collections import Counter
from fractions import Fraction

import pyarrow as pa
import pytest

from reasonvqa.absence_bases import BASES
from reasonvqa.tasks.questions import absence
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
    """vg:0 and ``n`` kitchens hold a cup and a sink; half of the kitchens a "plate"; two savannah images giraffes."""
    scenes = {"vg:0": ["cup", "sink"]}
    scenes.update({f"vg:k{i}": ["cup", "sink"] + (["plate"] if i % 2 else []) for i in range(n)})
    scenes.update({"vg:s1": ["giraffe", "grass"], "vg:s2": ["giraffe", "grass"]})
    return scenes


def test_an_improbable_label_has_the_cooccurrence_basis_with_its_estimate():
    found = absent_labels(corpus(_scenes(30)), ["vg:0"], 10, {}, 0.05)["vg:0"]
    by_label = {c.label: c for c in found}
    giraffe = by_label["giraffe"]
    assert giraffe.basis == "cooccurrence"
    # 31 images hold a cup, none of them a giraffe: (0 + 1) / (31 + 2); sink says the same, cup comes first
    assert {k: v for k, v in giraffe.evidence.items() if k != "estimate"} == {
        "probability": round(1 / 33, 6), "threshold": 0.05, "given": "cup", "given_images": 31, "with_label": 0,
        "taking_part": 2, "abstaining": 0}
    assert giraffe.evidence["estimate"].startswith("(with_label + 1) / (given_images + 2)")
    assert by_label["grass"].basis == "cooccurrence"
    # held by 15 of the 31 cup images: the most co-occurring, hence the likeliest to be there unannotated
    assert by_label["plate"].basis is None and set(by_label) == {"giraffe", "grass", "plate"}


# six images by hand: C[car, road] = 3, C[car, tree] = 2, C[road, tree] = 1, C[car, car] = 4, C[road, road] = 3 ...
SIX = corpus({"vg:1": ["car", "road", "tree"], "vg:2": ["car", "road"], "vg:3": ["car", "tree"], "vg:4": ["cup", "table"],
              "vg:5": ["cup", "table", "plate"], "vg:6": ["car", "road", "sky"]})


def test_the_threshold_is_strict_and_the_evidence_names_the_label_that_gave_the_maximum():
    # vg:2 (car: 4 images, road: 3): cup and table were never seen with either. At 0.2 road abstains (1 / (3 + 2) is
    # not below 0.2), car gives 1/6; at 0.21 road takes part and gives the maximum 1/5. The source vocabulary (labels
    # of 2 images or more) is car, cup, road, table, tree; tree 3/6 and sky 2/5 rank
    found = absent_labels(SIX, ["vg:2"], 5, {}, 0.2)["vg:2"]
    based = {c.label: c.evidence for c in found if c.basis == "cooccurrence"}
    assert set(based) == {"cup", "table"}
    assert {k: v for k, v in based["cup"].items() if k != "estimate"} == {
        "probability": round(1 / 6, 6), "threshold": 0.2, "given": "car", "given_images": 4, "with_label": 0,
        "taking_part": 1, "abstaining": 1}
    found = absent_labels(SIX, ["vg:2"], 5, {}, 0.21)["vg:2"]
    based = {c.label: c.evidence for c in found if c.basis == "cooccurrence"}
    assert set(based) == {"cup", "table"}
    assert {k: v for k, v in based["cup"].items() if k != "estimate"} == {
        "probability": 0.2, "threshold": 0.21, "given": "road", "given_images": 3, "with_label": 0,
        "taking_part": 2, "abstaining": 0}
    assert [(c.label, c.basis) for c in found if c.basis is None] == [("tree", None), ("sky", None)]
    # vg:3 (car, tree) at 1/3 (every label of 2 images takes part), all 7 labels asked: sky is (1 + 1) / (4 + 2) by
    # car, exactly the threshold, so not claimed; cup, plate, table 1/4 (tree); road 4/6
    found = absent_labels(SIX, ["vg:3"], 5, {}, 1 / 3, min_label_images=1)["vg:3"]
    assert sorted(c.label for c in found if c.basis == "cooccurrence") == ["cup", "plate", "table"]
    assert {c.label: c.evidence["given"] for c in found if c.basis == "cooccurrence"}["plate"] == "tree"


def test_taxonomy_classes_rank_by_the_same_estimate():
    # vg:2: tree 3/6 (car), sky 2/5 (road), dog and plate 1/5 (tie, by label); car is its own
    found = absent_labels(SIX, ["vg:2"], 5, {"vg": ["plate", "sky", "tree", "dog", "car"]}, 0.21)["vg:2"]
    assert [(c.label, c.basis) for c in found] == [("tree", "taxonomy"), ("sky", "taxonomy"), ("dog", "taxonomy"),
                                                   ("plate", "taxonomy")]
    assert [c.label for c in absent_labels(SIX, ["vg:2"], 1, {"vg": ["plate", "sky", "tree", "dog"]}, 0.21)["vg:2"]] == [
        "tree", "sky", "dog"]  # 3 * per_image


def test_images_taken_a_few_at_a_time_get_the_same_claims(monkeypatch):
    # the candidate rows are bounded by absence.ROW_BUDGET: one image per step here, all at once by default
    scenes = corpus(_scenes(30))
    images = ["vg:0", "vg:k1", "vg:k2", "vg:s1"]
    whole = absent_labels(scenes, images, 10, {"vg": ["plate", "giraffe", "dog"]}, 0.05)
    whole_unbased = absent_labels(scenes, images, 10, {}, 0.05)
    monkeypatch.setattr("reasonvqa.tasks.questions.absence.ROW_BUDGET", 1)
    assert absent_labels(scenes, images, 10, {"vg": ["plate", "giraffe", "dog"]}, 0.05) == whole
    stepped = absent_labels(scenes, images, 10, {}, 0.05)
    # vg:k1's plate (15 images) abstains, its cup and sink back the claims; vg:s1's labels (2 images) all abstain
    assert stepped == whole_unbased and set(stepped) == {"vg:0", "vg:k1", "vg:k2"}
    assert [[(c.label, c.basis, c.evidence) for c in stepped[i]] for i in stepped] == [
        [(c.label, c.basis, c.evidence) for c in whole_unbased[i]] for i in stepped]
    assert {c.label: c.basis for c in stepped["vg:0"]}["giraffe"] == "cooccurrence"


def test_few_images_of_a_label_cannot_back_an_improbability():
    found = absent_labels(corpus(_scenes(3)), ["vg:0"], 10, {}, 0.05)["vg:0"]
    assert {c.basis for c in found} == {None}  # 4 images hold a cup: (0 + 1) / (4 + 2) = 1/6 is not below 0.05
    found = absent_labels(corpus(_scenes(3)), ["vg:0"], 10, {}, 0.25)["vg:0"]
    assert {c.label for c in found if c.basis == "cooccurrence"} == {"giraffe", "grass"}
    # one rare label (a single image, 1 / (1 + 2) not below 0.05) abstains: cup and sink (31 images) still back claims
    rare = _scenes(30) | {"vg:0": ["cup", "sink", "samovar"], "vg:r": ["samovar", "kettle"]}
    found = absent_labels(corpus(rare), ["vg:0", "vg:r"], 10, {}, 0.05)
    based = {c.label: c.evidence for c in found["vg:0"] if c.basis == "cooccurrence"}
    assert set(based) == {"giraffe", "grass"}
    assert {k: v for k, v in based["giraffe"].items() if k != "estimate"} == {
        "probability": round(1 / 33, 6), "threshold": 0.05, "given": "cup", "given_images": 31, "with_label": 0,
        "taking_part": 2, "abstaining": 1}
    # vg:r holds only rare labels (samovar 2 images, kettle 1): all abstain, no claim has a basis
    assert {c.basis for c in found.get("vg:r", [])} <= {None}


def test_claims_are_deterministic_whatever_the_corpus_order():
    scenes = corpus(_scenes(30))
    images = ["vg:0", "vg:k2", "vg:k4"]
    first = absent_labels(scenes, images, 10, {}, 0.05)
    again = absent_labels(scenes.take(list(reversed(range(scenes.num_rows)))), images, 10, {}, 0.05)
    assert [(i, c.label, c.basis, c.evidence) for i in first for c in first[i]] == [
        (i, c.label, c.basis, c.evidence) for i in again for c in again[i]]


@pytest.mark.parametrize("threshold", [0.1, 0.03])
def test_cooccurrence_claims_match_a_dict_counting_reference(threshold: float):
    rng = random.Random(5)
    words = [f"w{n:02d}" for n in range(30)]
    labels = {f"vg:{i}": sorted(set(rng.choices(words, [1 / (n + 1) ** 0.5 for n in range(30)], k=rng.randint(2, 6))))
              for i in range(400)}
    held: Counter = Counter(s for ls in labels.values() for s in ls)
    both: Counter = Counter((s, x) for ls in labels.values() for s in ls for x in ls if s != x)
    # labels of fewer images than the first count whose floor is below the threshold abstain
    least = next(m for m in range(10**6) if Fraction(1, m + 2) < Fraction(str(threshold)))
    assert least == {0.1: 9, 0.03: 32}[threshold]

    def estimate(image: str, x: str, least: int = 0) -> tuple[Fraction, str]:
        return min(((Fraction(both[s, x] + 1, held[s] + 2), s) for s in labels[image] if held[s] >= least),
                   key=lambda e: (-e[0], e[1]), default=(Fraction(1), ""))

    images = sorted(labels)[:60]
    # per_image 100: the window covers the whole vocabulary, so every improbable label is claimed
    found = absent_labels(corpus(labels), images, 100, {}, threshold)
    abstained = 0
    for image in images:
        claims = found.get(image, [])
        improbable = {x for x in held if x not in labels[image] and estimate(image, x, least)[0] < Fraction(str(threshold))}
        assert {c.label for c in claims if c.basis == "cooccurrence"} == improbable
        for c in claims:
            if c.basis == "cooccurrence":
                p, given = estimate(image, c.label, least)
                taking_part = sum(held[s] >= least for s in labels[image])
                assert (c.evidence["probability"], c.evidence["given"]) == (round(float(p), 6), given)
                assert (c.evidence["given_images"], c.evidence["with_label"]) == (held[given], both[given, c.label])
                assert (c.evidence["taking_part"], c.evidence["abstaining"]) == (taking_part, len(labels[image]) - taking_part)
                abstained += c.evidence["abstaining"]
        # the unbased ranking: every label of the image counts, above its floor (its rarest label's)
        floor = Fraction(1, min(held[s] for s in labels[image]) + 2)
        ranked = sorted((x for x in held if x not in labels[image] and x not in improbable
                         and estimate(image, x)[0] > floor), key=lambda x: (-estimate(image, x)[0], x))
        assert [c.label for c in claims if c.basis is None] == ranked
    assert abstained > 0 or threshold == 0.1  # at 0.03 some claims are backed with rare labels abstaining


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


def test_the_kept_counts_are_never_those_of_another_corpus_of_the_same_size():
    # absent_labels keeps the last corpus's counts for the next shard; a corpus of as many pairs must not reuse them
    other = corpus({"vg:1": ["car", "road", "bush"], "vg:2": ["car", "road"], "vg:3": ["car", "bush"],
                    "vg:4": ["cup", "table"], "vg:5": ["cup", "table", "plate"], "vg:6": ["car", "road", "sky"]})
    absence._LAST.clear()
    fresh = absent_labels(other, ["vg:2"], 5, {}, 0.21)
    assert [c.label for c in fresh["vg:2"] if c.basis is None] == ["bush", "sky"]
    absent_labels(SIX, ["vg:2"], 5, {}, 0.21)
    assert absent_labels(other, ["vg:2"], 5, {}, 0.21) == fresh
