"""NMS: the toy case of the issue, brute-force definitions on random cases, torchvision semantics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextlib import nullcontext
from unittest import mock

from reasonvqa.tasks.proposals import nms as nms_module
from reasonvqa.tasks.proposals.nms import batched_nms, class_count_nms, class_counts, nms

# The greedy pass has three exact routes; each test below that names a route forces it.
ROUTES = {
    "sparse pairs, rounds": {},
    "sparse pairs, y bands": {"_BAND_MIN_BOXES": 0},
    "sparse pairs, one by one": {"_ROUNDS": 0},
    "blocked dense": {"_SPARSE_PAIRS_PER_BOX": 0},
}


def route(name: str):
    """A context in which the greedy pass takes the named route."""
    return mock.patch.multiple(nms_module, **ROUTES[name]) if ROUTES[name] else nullcontext()


def iou_scalar(a, b) -> float:
    """IoU of two XYXY boxes, written out like torchvision's box_iou (NaN when the union is 0)."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float("nan") if union == 0 else inter / union


def brute_force_greedy(boxes, key, threshold) -> list[int]:
    """Visit indices sorted by ``key``; keep one unless an already kept box has IoU > threshold."""
    kept: list[int] = []
    for i in sorted(range(len(boxes)), key=key):
        if not any(iou_scalar(boxes[j], boxes[i]) > threshold for j in kept):
            kept.append(i)
    return kept


def brute_force_suppressed_by(boxes, kept, threshold) -> list[int]:
    """For each box not kept, the first kept box (in visiting order) with IoU > threshold; -1 for kept ones."""
    return [-1 if i in kept else next(j for j in kept if iou_scalar(boxes[j], boxes[i]) > threshold)
            for i in range(len(boxes))]


def brute_force_class_count_nms(boxes, scores, labels, threshold) -> list[int]:
    count = {label: list(labels).count(label) for label in labels}
    return brute_force_greedy(boxes, lambda i: (-count[labels[i]], -scores[i], i), threshold)


def brute_force_nms(boxes, scores, threshold) -> list[int]:
    return brute_force_greedy(boxes, lambda i: (-scores[i], i), threshold)


# Toy case: three separate persons; person 2 overlaps a higher-scoring "man" box.
TOY_BOXES = np.array([[0, 0, 10, 20], [50, 0, 60, 20], [100, 0, 110, 20], [101, 0, 111, 20]], dtype=float)
TOY_SCORES = np.array([0.5, 0.6, 0.4, 0.9])
TOY_LABELS = np.array(["person", "person", "person", "man"])


def test_toy_score_nms_drops_the_overlapped_person():
    assert nms(TOY_BOXES, TOY_SCORES, 0.5).tolist() == [3, 1, 0]


def test_toy_class_count_nms_keeps_three_persons_and_drops_the_man():
    result = class_count_nms(TOY_BOXES, TOY_SCORES, TOY_LABELS, 0.5)
    assert result.keep.tolist() == [1, 0, 2]
    assert result.suppressed_by.tolist() == [-1, -1, -1, 2]


def test_class_counts():
    assert class_counts(np.array(["a", "b", "a", "c", "a"])).tolist() == [3, 1, 3, 1, 3]
    assert class_counts(np.array(["a", "b", "a", "c", "a"], dtype=object)).tolist() == [3, 1, 3, 1, 3]
    assert class_counts(np.array([], dtype=object)).tolist() == []


def test_zero_area_boxes_never_suppress():
    boxes = np.array([[5, 5, 5, 5], [5, 5, 5, 5], [0, 0, 10, 10]], dtype=float)
    assert nms(boxes, np.array([0.9, 0.8, 0.7]), 0.0).tolist() == [0, 1, 2]


def test_empty_input():
    assert nms(np.zeros((0, 4)), np.zeros(0), 0.5).tolist() == []
    result = class_count_nms(np.zeros((0, 4)), np.zeros(0), np.array([], dtype=object), 0.5)
    assert result.keep.tolist() == [] and result.suppressed_by.tolist() == []


def test_bad_box_shape_is_refused():
    with pytest.raises(ValueError, match="shape"):
        nms(np.zeros((3, 5)), np.zeros(3), 0.5)


@st.composite
def box_sets(draw, max_boxes=25, min_side=0):
    """Boxes on a coarse integer grid (many exact ties, touching and identical boxes), scores with ties."""
    n = draw(st.integers(0, max_boxes))
    coords = st.integers(0, 12)
    boxes, scores, labels = [], [], []
    for _ in range(n):
        x1, y1 = draw(coords), draw(coords)
        boxes.append([x1, y1, x1 + draw(st.integers(min_side, 8)), y1 + draw(st.integers(min_side, 8))])
        scores.append(draw(st.sampled_from([0.1, 0.25, 0.5, 0.75, 0.9])))
        labels.append(draw(st.sampled_from(["a", "b", "c", "d"])))
    threshold = draw(st.sampled_from([0.0, 0.2, 0.25, 0.5, 1 / 3, 0.7, 1.0]))
    return np.array(boxes, dtype=float).reshape(-1, 4), np.array(scores), np.array(labels, dtype=object), threshold


@pytest.mark.parametrize("route_name", ROUTES)
@settings(max_examples=300, deadline=None)
@given(box_sets())
def test_class_count_nms_matches_brute_force(route_name, case):
    boxes, scores, labels, threshold = case
    with route(route_name):
        result = class_count_nms(boxes, scores, labels, threshold)
    expected = brute_force_class_count_nms(boxes.tolist(), scores.tolist(), labels.tolist(), threshold)
    assert result.keep.tolist() == expected
    assert result.suppressed_by.tolist() == brute_force_suppressed_by(boxes.tolist(), expected, threshold)


@pytest.mark.parametrize("route_name", ROUTES)
@settings(max_examples=100, deadline=None)
@given(box_sets(min_side=-4))
def test_inverted_boxes_match_brute_force(route_name, case):
    """x2 < x1 or y2 < y1: negative areas, IoU 0 or of either sign; only the exact float test may decide."""
    boxes, scores, labels, threshold = case
    with route(route_name):
        result = class_count_nms(boxes, scores, labels, threshold)
    assert result.keep.tolist() == brute_force_class_count_nms(boxes.tolist(), scores.tolist(), labels.tolist(), threshold)


@settings(max_examples=300, deadline=None)
@given(box_sets())
def test_score_nms_matches_brute_force(case):
    boxes, scores, _, threshold = case
    assert nms(boxes, scores, threshold).tolist() == brute_force_nms(boxes.tolist(), scores.tolist(), threshold)


@settings(max_examples=200, deadline=None)
@given(box_sets())
def test_batched_nms_matches_per_label_brute_force(case):
    boxes, scores, labels, threshold = case
    kept = []
    for label in set(labels.tolist()):
        idx = [i for i in range(len(labels)) if labels[i] == label]
        kept += [idx[k] for k in brute_force_nms(boxes[idx].tolist(), scores[idx].tolist(), threshold)]
    expected = sorted(kept, key=lambda i: (-scores[i], i))
    assert batched_nms(boxes, scores, labels, threshold).tolist() == expected


def random_boxes(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    xy = rng.uniform(0, 200, size=(n, 2))
    wh = rng.uniform(1, 60, size=(n, 2))
    return np.hstack([xy, xy + wh]), rng.permutation(n).astype(float) / n  # distinct scores


@pytest.mark.parametrize("seed", range(5))
def test_score_nms_matches_torchvision(torchvision_ops, seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    boxes, scores = random_boxes(rng, 300)
    labels = rng.integers(0, 4, size=300)
    for threshold in (0.3, 0.5, 0.7):
        expected = torchvision_ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), threshold)
        assert nms(boxes, scores, threshold).tolist() == expected.tolist()
        expected = torchvision_ops.batched_nms(torch.from_numpy(boxes), torch.from_numpy(scores),
                                               torch.from_numpy(labels), threshold)
        assert batched_nms(boxes, scores, labels, threshold).tolist() == expected.tolist()


@pytest.mark.parametrize("seed", range(3))
def test_class_count_nms_over_several_blocks_matches_brute_force(seed):
    """Enough boxes for several blocks of the blocked sweep, clustered so blocks suppress each other."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0, 300, size=(60, 2))[rng.integers(0, 60, size=700)]
    boxes = np.hstack([centers - 15, centers + 15]) + rng.normal(0, 4, size=(700, 4))
    scores, labels = rng.uniform(size=700), rng.integers(0, 5, size=700).astype(str)
    result = class_count_nms(boxes, scores, labels, 0.5)
    expected = brute_force_class_count_nms(boxes.tolist(), scores.tolist(), labels.tolist(), 0.5)
    assert result.keep.tolist() == expected
    assert result.suppressed_by.tolist() == brute_force_suppressed_by(boxes.tolist(), expected, 0.5)


@pytest.mark.parametrize("route_name", ROUTES)
def test_detector_like_clusters_match_brute_force(route_name):
    """Clusters of jittered boxes of several sizes, as a detector gives them, on every route."""
    rng = np.random.default_rng(7)
    centers = rng.uniform([0, 0], [640, 480], size=(50, 2))
    sizes = rng.uniform(10, 150, size=(50, 2))
    owner = rng.integers(0, 50, size=400)
    half = sizes[owner] / 2
    boxes = np.hstack([centers[owner] - half, centers[owner] + half]) + rng.normal(0, 5, size=(400, 4))
    scores, labels = rng.uniform(size=400), rng.integers(0, 6, size=400).astype(str)
    for threshold in (0.0, 0.3, 0.5, 0.8, 1.0):
        with route(route_name):
            result = class_count_nms(boxes, scores, labels, threshold)
        expected = brute_force_class_count_nms(boxes.tolist(), scores.tolist(), labels.tolist(), threshold)
        assert result.keep.tolist() == expected
        assert result.suppressed_by.tolist() == brute_force_suppressed_by(boxes.tolist(), expected, threshold)


def test_long_chain_of_overlaps_matches_brute_force():
    """Each box overlaps only the next one: the rounds would take one per link, so the pass goes box by box."""
    x = np.arange(200, dtype=float) * 4
    boxes = np.stack([x, np.zeros(200), x + 10, np.full(200, 10.0)], axis=1)  # IoU of neighbours 6/14
    scores = np.linspace(1, 0.5, 200)
    expected = brute_force_nms(boxes.tolist(), scores.tolist(), 0.4)
    assert expected == list(range(0, 200, 2))
    assert nms(boxes, scores, 0.4).tolist() == expected


@pytest.mark.parametrize("threshold", [-0.5, 1.5])
def test_thresholds_outside_zero_one_match_brute_force(threshold):
    rng = np.random.default_rng(3)
    boxes, scores = random_boxes(rng, 60)
    assert nms(boxes, scores, threshold).tolist() == brute_force_nms(boxes.tolist(), scores.tolist(), threshold)


def test_infinite_coordinates_match_brute_force():
    rng = np.random.default_rng(4)
    boxes, scores = random_boxes(rng, 40)
    boxes[3, 2] = np.inf  # area and union infinite: IoU 0 with every box
    assert nms(boxes, scores, 0.3).tolist() == brute_force_nms(boxes.tolist(), scores.tolist(), 0.3)
