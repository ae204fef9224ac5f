"""Non-maximum suppression in numpy: score-ordered NMS and GroundingME's class-count NMS.

Boxes are ``(N, 4)`` arrays of XYXY pixel corners. IoU follows torchvision's ``box_iou``:
``area = (x2 - x1) * (y2 - y1)`` (no +1), ``iou = inter / (area_a + area_b - inter)``; a pair
whose union is 0 has IoU NaN, which never exceeds a threshold, so it never suppresses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Suppression:
    """Result of a greedy suppression.

    ``keep``: indices of kept boxes in the order they were visited.
    ``suppressed_by``: for every input box, the index of the kept box that suppressed it,
    or -1 when the box was kept.
    """

    keep: np.ndarray
    suppressed_by: np.ndarray


def _as_boxes(boxes: np.ndarray) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"boxes must have shape (N, 4), got {boxes.shape}")
    return boxes


def greedy_suppress(boxes: np.ndarray, order: np.ndarray, iou_threshold: float) -> Suppression:
    """Visit boxes in ``order``; keep a box unless a kept box overlaps it with IoU > threshold.

    Each step keeps the first remaining box and removes, in one vectorized pass, every
    remaining box it suppresses, so the loop runs once per kept box, not once per box.
    """
    boxes = _as_boxes(boxes)
    order = np.asarray(order, dtype=np.int64)
    suppressed_by = np.full(len(boxes), -1, dtype=np.int64)
    keep: list[int] = []
    # rows x1, y1, x2, y2, area, index of the boxes still to visit, in visiting order: one
    # compress per step keeps them contiguous
    rest = np.empty((6, len(order)))
    rest[:4] = boxes[order].T
    rest[4] = (rest[2] - rest[0]) * (rest[3] - rest[1])
    rest[5] = order
    with np.errstate(invalid="ignore", divide="ignore"):
        while rest.shape[1]:
            x1, y1, x2, y2, area, index = rest[:, 0]
            keep.append(int(index))
            rest = rest[:, 1:]
            width = np.minimum(rest[2], x2) - np.maximum(rest[0], x1)
            height = np.minimum(rest[3], y2) - np.maximum(rest[1], y1)
            inter = np.maximum(width, 0.0) * np.maximum(height, 0.0)
            drop = inter / (area + rest[4] - inter) > iou_threshold  # NaN (zero union) compares False
            if drop.any():
                suppressed_by[rest[5, drop].astype(np.int64)] = int(index)
                rest = rest[:, ~drop]
    return Suppression(np.asarray(keep, dtype=np.int64), suppressed_by)


def score_order(scores: np.ndarray) -> np.ndarray:
    """Indices by score descending, ties by index ascending (a stable sort, as torchvision's CPU nms)."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.lexsort((np.arange(len(scores)), -scores))


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Score-ordered NMS with torchvision ``ops.nms`` semantics: kept indices, highest score first."""
    return greedy_suppress(boxes, score_order(scores), iou_threshold).keep


def batched_nms(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, iou_threshold: float) -> np.ndarray:
    """NMS within each label independently (torchvision ``ops.batched_nms``); kept indices by score.

    Boxes of different labels never suppress each other: each step only compares boxes of
    the kept box's label.
    """
    boxes = _as_boxes(boxes)
    labels = np.asarray(labels)
    order = score_order(scores)
    keep = np.zeros(len(boxes), dtype=bool)
    for label in np.unique(labels):
        members = order[labels[order] == label]
        keep[greedy_suppress(boxes, members, iou_threshold).keep] = True
    return order[keep[order]]


def class_counts(labels: np.ndarray) -> np.ndarray:
    """For every box, the number of boxes in the input that carry its label."""
    _, inverse, counts = np.unique(np.asarray(labels), return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)]


def class_count_order(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Visiting order of class-count NMS: class count desc, then score desc, then index asc."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.lexsort((np.arange(len(scores)), -scores, -class_counts(labels)))


def class_count_nms(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, iou_threshold: float) -> Suppression:
    """Class-count NMS (GroundingME, section 3.2.1): prefer boxes whose class has more instances.

    Definition: let ``count(i)`` be the number of input boxes with the label of box ``i``.
    Visit the boxes ordered by ``count`` descending, then score descending, then input
    index ascending. Keep a visited box unless a box kept before it has IoU strictly above
    ``iou_threshold`` with it, whatever either box's label (suppression is across classes).
    Deterministic: the order is total. ``keep`` lists the kept indices in visiting order.
    """
    return greedy_suppress(boxes, class_count_order(scores, labels), iou_threshold)
