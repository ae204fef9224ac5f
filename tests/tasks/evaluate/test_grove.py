"""Grove against hand-computed values: the four outcome combinations, VistaQA's hallucination cases, a
two-mask Hungarian matching and the floors at 0.1."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from reasonvqa import masks
from reasonvqa.tasks.evaluate import grove as grove_module
from reasonvqa.tasks.evaluate.grove import EPSILON, grove, mask_score, mask_scores, score_grove

H, W = 4, 10


def columns(first: int, last: int) -> dict:
    """A compressed COCO RLE of the 4 x 10 image covering columns first..last (inclusive)."""
    mask = np.zeros((H, W), np.uint8)
    mask[:, first:last + 1] = 1
    return masks.coco_checked(masks.coco_encode(mask))


# ground truth: g1 = columns 0-3 (16 px), g2 = columns 6-9 (16 px)
REGIONS = {"g1": columns(0, 3), "g2": columns(6, 9)}
P_WIDE = columns(2, 7)  # 24 px: IoU 8/32 = 0.25 with g1 and with g2
P_EXACT = columns(0, 3)  # IoU 1 with g1, 0 with g2


def test_four_outcome_combinations():
    # empty prediction on empty truth: 1; non-empty on empty: 0; empty on non-empty: 0; non-empty on non-empty: IoU
    scores = mask_scores(["i", "i", "i", "i"], [[], [], ["g1"], ["g1"]], [[], [P_EXACT], [], [P_WIDE]], REGIONS)
    assert scores.tolist() == [1.0, 0.0, 0.0, 0.25]
    # with a right answer (S_a = 1): sqrt(1 * 1), sqrt(1 * 0.1), sqrt(1 * 0.1), sqrt(1 * 0.25)
    assert grove(np.ones(4), scores) == pytest.approx([1.0, math.sqrt(0.1), math.sqrt(0.1), 0.5])


def test_two_masks_hungarian_matching():
    # P_WIDE-g1 0.25 + P_EXACT-g2 0 = 0.25 (a greedy first match); the optimum is P_WIDE-g2 0.25 + P_EXACT-g1 1.0
    ious = masks.coco_iou_matrix([P_WIDE, P_EXACT], [REGIONS["g1"], REGIONS["g2"]])
    assert ious == pytest.approx(np.array([[0.25, 0.25], [1.0, 0.0]]))
    assert mask_score(ious) == pytest.approx(1.25 / 2)
    # a spurious third mask: the same matching, divided by max(|P|, |G|) = 3
    spurious = columns(5, 5)
    assert mask_scores(["i"], [["g1", "g2"]], [[P_WIDE, P_EXACT, spurious]], REGIONS)[0] == pytest.approx(1.25 / 3)
    # one mask for two truths: its best IoU over max(1, 2)
    assert mask_scores(["i"], [["g1", "g2"]], [[P_EXACT]], REGIONS)[0] == pytest.approx(0.5)


def test_floors_at_epsilon():
    assert EPSILON == 0.1
    assert grove(np.array([0.0]), np.array([0.0]))[0] == pytest.approx(0.1)  # sqrt(0.1 * 0.1)
    assert grove(np.array([0.0]), np.array([0.04]))[0] == pytest.approx(0.1)  # 0.04 floored to 0.1
    assert grove(np.array([1.0]), np.array([0.4]))[0] == pytest.approx(math.sqrt(0.4))
    assert grove(np.array([0.0]), np.array([0.9]))[0] == pytest.approx(math.sqrt(0.09))


def test_hallucination_cases_of_vistaqa():
    """Section 4.1: an absent entity is answered right with no mask (1), right with a spurious mask (the mask
    score 0, floored), wrong with no mask (the answer floored), wrong with a mask (both floored)."""
    rows = pl.DataFrame({
        "question_id": ["right-no-mask", "right-mask", "wrong-no-mask", "wrong-mask", "grounded"],
        "image_id": ["i"] * 5, "evidence_region_ids": [[], [], [], [], ["g1", "g2"]],
        "task_type": ["attribute"] * 4 + ["spatial"], "visual_domain": ["indoor"] * 5,
        "is_hallucination": [True] * 4 + [False]})
    scored = score_grove(rows, np.array([1.0, 1.0, 0.0, 0.0, 1.0]), [[], [P_WIDE], [], [P_WIDE], [P_WIDE, P_EXACT]],
                         REGIONS)
    assert scored["s_m"].to_list() == pytest.approx([1.0, 0.0, 1.0, 0.0, 0.625])
    assert scored["grove"].to_list() == pytest.approx([1.0, math.sqrt(0.1), math.sqrt(0.1), 0.1, math.sqrt(0.625)])


def test_one_iou_call_per_image(monkeypatch):
    calls = []
    real = masks.coco_iou_matrix
    monkeypatch.setattr(grove_module.masks, "coco_iou_matrix", lambda p, g: calls.append((len(p), len(g))) or real(p, g))
    scores = mask_scores(["a", "b", "a"], [["g1"], ["g2"], ["g1", "g2"]], [[P_EXACT], [P_WIDE], [P_WIDE, P_EXACT]], REGIONS)
    assert scores.tolist() == pytest.approx([1.0, 0.25, 0.625])
    # image a: its distinct masks (P_EXACT is predicted twice: one row) against its two regions at once
    assert sorted(calls) == [(1, 1), (2, 2)]


def test_missing_region_is_not_scored():
    assert np.isnan(mask_scores(["i"], [["gone"]], [[P_EXACT]], REGIONS)[0])
