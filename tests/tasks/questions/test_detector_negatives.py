"""The detector absence basis: the proposals stage's negatives become ``detector`` claims (literal tables in the
negatives format of tasks/proposals/stage.py)."""

from __future__ import annotations

import json

import pyarrow as pa

from reasonvqa.tasks.questions.absence import AbsentLabel
from reasonvqa.tasks.questions.detector_negatives import with_detector_negatives
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.grounded_shard import generate_grounded
from reasonvqa.tasks.questions.regions import image_labels, shard_regions

from tests.tasks.questions.test_grounded import ATTRIBUTES, CORPUS_EXTRA, IMAGES, OBJECTS, SOURCE_REGIONS


def negatives(rows: list[tuple[str, str, float]]) -> pa.Table:
    return pa.table({"image_id": [r[0] for r in rows], "label": [r[1] for r in rows],
                     "best_score": [r[2] for r in rows], "threshold": [0.35] * len(rows),
                     "model": ["grounding_dino"] * len(rows)})


def test_a_negative_backs_its_label_and_an_unbased_choice_gives_way():
    improbable = AbsentLabel("giraffe", "cooccurrence", {"probability": 0.01})
    absent = {"vg:1": [AbsentLabel("cup", None), improbable, AbsentLabel("plate", None)],
              "nuscenes:f": [AbsentLabel("truck", "taxonomy", {"taxonomy": "nuscenes", "classes": 3})]}
    found = with_detector_negatives(absent, negatives([("vg:1", "cup", 0.12), ("vg:1", "giraffe", 0.05),
                                                       ("vg:2", "dog", 0.2), ("nuscenes:f", "sidewalk", 0.01)]),
                                    {"vg:1", "vg:2"})
    assert [(c.label, c.basis) for c in found["vg:1"]] == [("giraffe", "cooccurrence"), ("plate", None),
                                                           ("cup", "detector")]
    assert found["vg:1"][2].evidence == {"model": "grounding_dino", "threshold": 0.35, "best_score": 0.12}
    assert [(c.label, c.basis) for c in found["vg:2"]] == [("dog", "detector")]
    assert found["nuscenes:f"] == absent["nuscenes:f"]  # a taxonomy image: only its classes
    assert with_detector_negatives(absent, None, {"vg:1"}) is absent


def test_a_negative_of_the_detector_is_a_based_hallucination_question():
    regions = shard_regions(OBJECTS, ATTRIBUTES, SOURCE_REGIONS)
    labels = pa.concat_tables([image_labels(OBJECTS, regions), CORPUS_EXTRA])
    result = generate_grounded(IMAGES, OBJECTS, ATTRIBUTES, regions, labels, GroundedConfig(), 0,
                               taxonomies={"nuscenes": ["car", "pedestrian"]},
                               negatives=negatives([("vg:7", "giraffe", 0.08), ("nuscenes:cam1", "sidewalk", 0.02)]))
    rows = [q for q in result.outputs["questions"].to_pylist() if q["is_hallucination"]]
    giraffe = [q for q in rows if q["answer"] in ("There is no giraffe in the image.", "There are no giraffes in the image.")]
    assert giraffe and {q["absence_basis"] for q in giraffe} == {"detector"}
    assert json.loads(giraffe[0]["absence_evidence"]) == {"best_score": 0.08, "model": "grounding_dino", "threshold": 0.35}
    assert not any("sidewalk" in q["question"] or "sidewalk" in q["answer"] for q in rows)
