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
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    areas = (x2 - x1) * (y2 - y1)
    suppressed_by = np.full(len(boxes), -1, dtype=np.int64)
    keep: list[int] = []
    remaining = np.asarray(order, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        while remaining.size:
            i = int(remaining[0])
            keep.append(i)
            rest = remaining[1:]
            width = np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0.0, None)
            height = np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0.0, None)
            inter = width * height
            iou = inter / (areas[i] + areas[rest] - inter)
            drop = iou > iou_threshold  # NaN (zero union) compares False: never suppresses
            suppressed_by[rest[drop]] = i
            remaining = rest[~drop]
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
