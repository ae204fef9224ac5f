"""The report of literal rows of every kind: each kind by its paper's metric, PROVE's rows counted without a judge."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from reasonvqa import masks
from reasonvqa.tasks.evaluate.predictions import Prediction, Predictions
from reasonvqa.tasks.evaluate.release_rows import ReleaseSplit
from reasonvqa.tasks.evaluate.scoring import NEEDS_JUDGE, score_split


def test_each_kind_by_its_metric_and_verified_needs_the_judge():
    region = np.zeros((4, 10), np.uint8)
    region[:, :4] = 1
    rle = masks.coco_checked(masks.coco_encode(region))
    rows = pl.DataFrame({
        "question_id": ["t1", "g1", "g2", "v1", "v2"],
        "question": ["q"] * 5, "answer": ["Paris", "red", "There is no cat in the image.", "a dog", "two"],
        "choices": [["Paris", "Rome"], None, None, None, None],
        "kind": ["template", "grounded", "grounded", "verified", "verified"],
        "task_type": ["knowledge", "attribute", "attribute", None, None], "n_hop": [2, 0, 0, 0, 0],
        "domains": [["Places & Locations"], None, None, None, None],
        "evidence_region_ids": [None, ["r1"], [], None, None], "is_hallucination": [False, False, True, False, False],
        "image_id": ["i1", "i2", "i2", "i3", "i3"], "visual_domain": ["landmarks", "indoor", "indoor", "mixed", "mixed"],
    }, schema_overrides={"n_hop": pl.Int8})
    predictions = Predictions(Path("p.jsonl"), 4, {
        "t1": Prediction("Rome", choice=0),  # the choice decides MC (right); the answer is open-ended (wrong)
        "g1": Prediction("Red.", masks=[rle]),  # S_a 1, S_m 1
        "g2": Prediction("a cat", masks=[rle]),  # S_a 0, a mask on an empty truth: S_m 0 -> grove 0.1
        "v1": Prediction("a dog"),
    }, [])
    report = score_split(ReleaseSplit(Path("release"), "test", rows, {"r1": rle}), predictions)
    assert report["questions"] == 5 and report["scored"] == 4
    template = report["kinds"]["template"]
    assert (template["metrics"]["multiple_choice"]["value"], template["metrics"]["open_ended"]["value"]) == (1.0, 0.0)
    grounded = report["kinds"]["grounded"]
    assert grounded["metrics"]["grove"]["value"] == round((1.0 + 0.1) / 2, 4)
    assert grounded["by_hallucination"]["hallucination"]["grove"] == {"value": 0.1, "n": 1, "ci95": [0.1, 0.1]}
    assert grounded["by_visual_domain"]["indoor"]["s_a"]["value"] == 0.5
    assert report["kinds"]["verified"] == {"questions": 2, "scored": 1, "paper": "PROVE", "note": NEEDS_JUDGE,
                                           "metrics": {}}
