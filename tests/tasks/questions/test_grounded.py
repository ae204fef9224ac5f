"""Grounded questions from regions: literal shards in the record model (a Visual Genome street scene,
a nuScenes camera keyframe with 3D centers, an SA-1B image with RLE masks)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest
from pycocotools import mask as mask_utils

from reasonvqa import schemas
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.grounded_shard import generate_grounded
from reasonvqa.tasks.questions.absence import absent_labels
from reasonvqa.tasks.questions.hallucination import is_absent
from reasonvqa.tasks.questions.grounded import spatial_answer
from reasonvqa.tasks.questions.regions import Region, image_labels, shard_regions

IMAGES = schemas.from_rows([
    dict(image_id="vg:7", source="vg", source_image_id="7", width=800, height=600),
    dict(image_id="nuscenes:cam1", source="nuscenes", source_image_id="cam1", width=1600, height=900),
    dict(image_id="sa1b:9", source="sa1b", source_image_id="9", width=40, height=30),
], schemas.IMAGES)


# WordNet 3.0 synsets as Visual Genome gives them: the class label is the synset's lemma ("sign" -> "signboard")
SYNSETS = {"car": "car.n.01", "tree": "tree.n.01", "sign": "signboard.n.01", "pole": "pole.n.01"}


def vg(native, label, box):
    x, y, w, h = box
    return dict(object_id=f"vg:7/o{native}", image_id="vg:7", label=label, names=[label], x=x, y=y, w=w, h=h,
                origin="annotation:vg", synset=SYNSETS[label], synsets=[SYNSETS[label]])


OBJECTS = schemas.from_rows([
    vg(1, "car", (50, 300, 100, 80)),
    vg(2, "car", (500, 320, 120, 90)),
    vg(3, "tree", (300, 20, 80, 200)),
    vg(4, "sign", (420, 40, 30, 30)),
    vg(5, "pole", (700, 100, 10, 300)),
    vg(6, "pole", (701, 101, 10, 300)),  # a duplicate annotation of the same pole
], schemas.OBJECTS)
ATTRIBUTES = schemas.from_rows([
    dict(object_id="vg:7/o1", image_id="vg:7", attribute="white"),
    dict(object_id="vg:7/o2", image_id="vg:7", attribute="red"),
    dict(object_id="vg:7/o3", image_id="vg:7", attribute="green"),
    dict(object_id="vg:7/o4", image_id="vg:7", attribute="metal"),
], schemas.ATTRIBUTES)


def rle(top: int, left: int, h: int, w: int) -> dict:
    bits = np.zeros((30, 40), dtype=np.uint8, order="F")
    bits[top:top + h, left:left + w] = 1
    encoded = mask_utils.encode(bits)
    return {"size": [30, 40], "counts": encoded["counts"].decode("ascii")}


def nu(token, x, depth):
    return dict(region_id=f"nuscenes:cam1/g{token}", image_id="nuscenes:cam1", label="car", x=x, y=400.0, w=120.0,
                h=80.0, area=9600.0, origin="annotation:nuscenes", center_3d=[0.0, 1.0, depth])


SOURCE_REGIONS = schemas.from_rows([
    nu("a", 100.0, 35.0), nu("b", 700.0, 12.0), nu("c", 1300.0, 50.0),
    dict(region_id="sa1b:9/g1", image_id="sa1b:9", x=2.0, y=3.0, w=10.0, h=8.0, area=80.0, mask=rle(3, 2, 8, 10),
         origin="annotation:sa1b"),
    dict(region_id="sa1b:9/g2", image_id="sa1b:9", x=25.0, y=15.0, w=4.0, h=3.0, area=12.0, mask=rle(15, 25, 3, 4),
         origin="annotation:sa1b"),
], schemas.REGIONS)

# other images of the corpus: a dog and a bicycle appear with trees and cars elsewhere
_EXTRA = {"vg:100": ["tree", "dog", "bench", "bird", "lamp"], "vg:101": ["car", "dog", "bicycle", "truck", "bus", "person"],
          "vg:102": ["car", "car door"]}
CORPUS_EXTRA = pa.table({"image_id": [i for i, labels in _EXTRA.items() for _ in labels],
                         "label": [label for labels in _EXTRA.values() for label in labels]})


@pytest.fixture()
def shard():
    regions = shard_regions(OBJECTS, ATTRIBUTES, SOURCE_REGIONS)
    corpus = pa.concat_tables([image_labels(OBJECTS, regions), CORPUS_EXTRA])
    config = GroundedConfig(max_pairs_per_image=20)
    result = generate_grounded(IMAGES, OBJECTS, ATTRIBUTES, regions, corpus, config, 0)
    return result, regions, config


def questions_of(result):
    return result.outputs["questions"].to_pylist()


def test_vg_objects_become_box_only_regions_with_their_attributes(shard):
    _, regions, _ = shard
    rows = {r["region_id"]: r for r in regions.to_pylist()}
    assert rows["vg:7/g1"]["attributes"] == ["white"] and rows["vg:7/g1"]["mask"] is None
    assert rows["vg:7/g1"]["origin"] == "annotation:vg" and rows["vg:7/g1"]["area"] == 8000
    assert rows["sa1b:9/g1"]["mask"]["size"] == [30, 40]
    assert regions["region_id"].to_pylist() == sorted(regions["region_id"].to_pylist())


def test_every_candidate_is_a_question_or_a_reject(shard):
    result, _, _ = shard
    assert result.rows_in == result.outputs["questions"].num_rows + len(result.rejects) > 0
    assert {r["reason"] for r in result.rejects.rows} >= {"duplicate_boxes", "ambiguous_spatial"}
    assert all(r["source"].startswith("regions#") for r in result.rejects.rows)


def test_nuscenes_objects_without_a_synset_are_classes_of_their_own_taxonomy():
    """The nuScenes reader writes an object (no WordNet synset) beside each box region, as Visual Genome does:
    its category is a class, never refused ``no_synset`` like a Visual Genome object without a synset."""
    nu_objects = schemas.from_rows([
        dict(object_id=f"nuscenes:cam1/o{t}", image_id="nuscenes:cam1", label="car", names=["car"], x=x, y=400.0,
             w=120.0, h=80.0, origin="annotation:nuscenes") for t, x in (("a", 100.0), ("b", 700.0), ("c", 1300.0))],
        schemas.OBJECTS)
    objects = pa.concat_tables([OBJECTS, nu_objects])
    regions = shard_regions(objects, ATTRIBUTES, SOURCE_REGIONS)
    corpus = pa.concat_tables([image_labels(objects, regions), CORPUS_EXTRA])
    result = generate_grounded(IMAGES, objects, ATTRIBUTES, regions, corpus, GroundedConfig(max_pairs_per_image=20), 0)
    assert not [r for r in result.rejects.rows if r["reason"] == "no_synset"]
    counts = {q["question"]: q["answer"] for q in questions_of(result)
              if q["image_id"] == "nuscenes:cam1" and q["task_type"] == "counting" and not q["is_hallucination"]}
    assert counts["How many cars are there in the image?"] == "3"


def test_counts_equal_the_number_of_evidence_regions_of_one_class(shard):
    result, regions, _ = shard
    labels = dict(zip(regions["region_id"].to_pylist(), regions["label"].to_pylist()))
    counting = [q for q in questions_of(result) if q["task_type"] == "counting" and not q["is_hallucination"]]
    by_question = {(q["image_id"], q["question"]): q for q in counting}
    assert by_question[("vg:7", "How many cars are there in the image?")]["answer"] == "2"
    assert by_question[("nuscenes:cam1", "How many cars are there in the image?")]["answer"] == "3"
    assert ("vg:7", "How many poles are there in the image?") not in by_question  # duplicate boxes
    for q in counting:
        assert int(q["answer"]) == len(q["evidence_region_ids"])
        assert len({labels[r] for r in q["evidence_region_ids"]}) == 1


def test_spatial_answers_agree_with_box_geometry(shard):
    result, regions, config = shard
    rows = {r["region_id"]: r for r in regions.to_pylist()}
    spatial = [q for q in questions_of(result) if q["task_type"] == "spatial" and not q["is_hallucination"]]
    assert spatial
    for q in spatial:
        if "nearest to the camera" in q["question"]:
            ordered = sorted(q["evidence_region_ids"], key=lambda r: rows[r]["x"])
            nearest = min(ordered, key=lambda r: rows[r]["center_3d"][2])
            names = {3: ["leftmost", "middle", "rightmost"], 2: ["left", "right"]}[len(ordered)]
            assert q["answer"] == f"the {names[ordered.index(nearest)]} one"
            continue
        a, b = (rows[r] for r in q["evidence_region_ids"])  # in the order the question names them
        if q["answer"] in ("left", "right"):
            assert (a["x"] + a["w"] < b["x"]) == (q["answer"] == "left")
            assert (b["x"] + b["w"] < a["x"]) == (q["answer"] == "right")
        elif q["answer"] in ("above", "below"):
            assert (a["y"] + a["h"] < b["y"]) == (q["answer"] == "above")
        else:
            assert (a["center_3d"][2] < b["center_3d"][2]) == (q["answer"] == "in front of")
    nearest = [q for q in spatial if "nearest" in q["question"]]
    assert [q["answer"] for q in nearest] == ["the middle one"]


def test_attribute_identification_and_comparison(shard):
    result, _, _ = shard
    found = {(q["image_id"], q["question"]): (q["answer"], q["evidence_region_ids"]) for q in questions_of(result)}
    assert found[("vg:7", "What color is the tree?")] == ("green", ["vg:7/g3"])
    assert found[("vg:7", "What is the signboard made of?")] == ("metal", ["vg:7/g4"])
    assert found[("vg:7", "What is the red object in the image?")] == ("car", ["vg:7/g2"])
    # unlabeled SA-1B masks are named by markers numbered by their place in evidence_region_ids, never by coordinates
    size = [k for k in found if k[0] == "sa1b:9" and k[1].startswith("Which appears larger")]
    assert size == [("sa1b:9", "Which appears larger in the image, the marked region 1 or the marked region 2?")]
    answer, evidence = found[size[0]]
    assert answer == f"marked region {evidence.index('sa1b:9/g1') + 1}"  # g1 (80 px) is larger than g2 (12 px)


def test_hallucination_questions_ask_about_absent_cooccurring_objects(shard):
    result, regions, config = shard
    questions = questions_of(result)
    halluc = [q for q in questions if q["is_hallucination"]]
    grounded = [q for q in questions if not q["is_hallucination"]]
    assert halluc and all(q["evidence_region_ids"] == [] for q in halluc)
    # vg:7 has every co-occurring absent object it can; nuScenes' car co-occurs with vg:7's classes too
    assert len(halluc) == result.extra["hallucination"] > len(grounded) * 0.27 / 0.73
    pairs = image_labels(OBJECTS, regions).to_pydict()
    asked = set()
    # without annotated relations, impossible relations are the spatial ones the boxes refute
    assert {q["template_ids"][0] for q in halluc} == {"hallucination:absent_object", "hallucination:wrong_attribute",
                                                      "hallucination:impossible_relation"}
    for q in (q for q in halluc if q["template_ids"] == ["hallucination:absent_object"]):
        assert q["image_id"] != "sa1b:9"  # unlabeled masks may show anything: absence cannot be checked
        labels = {label for i, label in zip(pairs["image_id"], pairs["label"]) if i == q["image_id"]}
        absent = re.fullmatch(r"There (?:is|are) no (.+) in the image\.", q["answer"]).group(1)
        absent = absent[:-1] if q["task_type"] == "counting" else absent  # "dogs"
        assert absent in q["question"] and absent not in labels
        assert not any(re.search(rf"\b{absent}\b", label) or re.search(rf"\b{label}\b", absent) for label in labels)
        asked.add(absent)
    assert {"dog", "bicycle"} <= asked
    # "car door" co-occurs but a car is present: never asked as absent
    assert not any("car door" in q["question"] for q in halluc)


def test_absence_is_checked_by_whole_words_both_ways():
    assert not is_absent("car", {"car door"}) and not is_absent("cars", {"car"}) and not is_absent("car door", {"car"})
    assert is_absent("cart", {"car"}) and is_absent("dog", {"hot dog stand"}) is False


def test_cooccurrence_ranks_labels_seen_with_this_scene():
    corpus = pa.table({"image_id": ["a", "a", "b", "b", "c", "c", "d"], "label": ["tree", "car", "tree", "dog", "car", "dog", "cat"]})
    found = absent_labels(corpus, ["a"], 2, {}, 0.05)
    # a dog is seen with each of its labels, the cat with neither; the most co-occurring label has no basis (likely
    # present, unannotated)
    assert [(c.label, c.basis) for c in found["a"]] == [("dog", None)]


def test_spatial_margin_skips_close_pairs():
    a = Region("r1", "i", "a", 0, 0, 100, 10, 1000, None)
    b = Region("r2", "i", "b", 105, 0, 100, 10, 1000, None)
    config = GroundedConfig(spatial_margin=0.02)
    assert spatial_answer(a, b, "horizontal", 1000, 1000, config) is None  # 5 px apart, margin 20 px
    assert spatial_answer(a, b, "horizontal", 100, 100, config) == "left"


def test_output_is_deterministic(shard):
    result, regions, config = shard
    corpus = pa.concat_tables([image_labels(OBJECTS, regions), CORPUS_EXTRA])
    again = generate_grounded(IMAGES, OBJECTS, ATTRIBUTES, regions, corpus, config, 0)
    assert again.outputs["questions"].equals(result.outputs["questions"])
