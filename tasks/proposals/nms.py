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

    A suppressed box's ``suppressed_by`` is the first kept box (in visiting order) that overlaps
    it. Computed block by block (``_BLOCK`` boxes of the order at a time, like the blocked NMS of
    GPU implementations): one vectorized IoU test of the block against every box kept so far, one
    of the block against itself, then a sweep through the block on bit sets (Python ints), so the
    numpy calls are a few per block instead of ~15 per kept box.
    """
    boxes = _as_boxes(boxes)
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    suppressed_by = np.full(len(boxes), -1, dtype=np.int64)
    # rows x1, y1, x2, y2, area of the boxes in visiting order
    visit = np.empty((5, n))
    visit[:4] = boxes[order].T
    visit[4] = (visit[2] - visit[0]) * (visit[3] - visit[1])
    kept = np.empty(n, dtype=np.int64)  # positions in the visiting order of the kept boxes, in order
    n_kept = 0
    for start in range(0, n, _BLOCK):
        block = visit[:, start:start + _BLOCK]
        size = block.shape[1]
        # by[j]: position (in visiting order) of the first kept box suppressing block box j, or -1
        by = np.full(size, -1, dtype=np.int64)
        if n_kept:
            over = _iou_above(visit[:, kept[:n_kept]], block, iou_threshold)  # (kept, block)
            hit = over.any(axis=0)
            by[hit] = kept[over.argmax(axis=0)[hit]]
        within = _iou_above(block, block, iou_threshold)  # (block, block)
        # the sweep on Python ints as bit sets (bit j = block box j): no numpy call per box
        rows = np.packbits(within, axis=1, bitorder="little")
        width = rows.shape[1]
        rows = rows.tobytes()
        removed = int.from_bytes(np.packbits(by >= 0, bitorder="little").tobytes(), "little")
        local = []
        for j in range(size):
            if removed >> j & 1:
                continue
            local.append(j)
            removed |= int.from_bytes(rows[j * width:(j + 1) * width], "little") >> (j + 1) << (j + 1)
        kept[n_kept:n_kept + len(local)] = start + np.asarray(local, dtype=np.int64)
        n_kept += len(local)
        newly = np.ones(size, dtype=bool)
        newly[local] = False
        newly &= by < 0
        if newly.any():  # suppressed inside the block: by the first box kept in the block that overlaps it
            first = within[local][:, newly].argmax(axis=0)
            by[newly] = start + np.asarray(local, dtype=np.int64)[first]
        done = by >= 0
        suppressed_by[order[start:start + size][done]] = order[by[done]]
    return Suppression(order[kept[:n_kept]], suppressed_by)


_BLOCK = 128


def _iou_above(a: np.ndarray, b: np.ndarray, iou_threshold: float) -> np.ndarray:
    """``iou(a[:, i], b[:, j]) > threshold`` for columns of (x1, y1, x2, y2, area) rows; NaN (zero union) is False.

    The union is ``area_a + area_b - inter`` in this operand order, the same float result as
    torchvision's ``box_iou``.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        width = np.minimum(a[2][:, None], b[2][None, :])
        width -= np.maximum(a[0][:, None], b[0][None, :])
        np.maximum(width, 0.0, out=width)
        height = np.minimum(a[3][:, None], b[3][None, :])
        height -= np.maximum(a[1][:, None], b[1][None, :])
        np.maximum(height, 0.0, out=height)
        width *= height  # the intersection
        union = a[4][:, None] + b[4][None, :]
        union -= width
        return width / union > iou_threshold


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
