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
    it. Two exact ways to the same result: for finite boxes and ``0 <= threshold <= 1`` the
    overlapping pairs are found once by a sweep along x (``_overlap_pairs``) and the greedy pass
    walks that sparse graph; otherwise, or when boxes are so stacked that the candidate pairs
    would outnumber ``_SPARSE_PAIRS_PER_BOX`` per box, the blocked dense sweep runs.
    """
    boxes = _as_boxes(boxes)
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    # rows x1, y1, x2, y2, area of the boxes in visiting order
    visit = np.empty((5, n))
    visit[:4] = boxes[order].T
    visit[4] = (visit[2] - visit[0]) * (visit[3] - visit[1])
    pairs = None
    if 0.0 <= iou_threshold <= 1.0 and np.isfinite(visit).all():
        pairs = _overlap_pairs(visit, float(iou_threshold), _SPARSE_PAIRS_PER_BOX * n)
    if pairs is None:
        kept, by = _greedy_blocked(visit, iou_threshold)
    else:
        kept, by = _greedy_on_pairs(n, *pairs)
    suppressed_by = np.full(len(boxes), -1, dtype=np.int64)
    done = by >= 0
    suppressed_by[order[done]] = order[by[done]]
    return Suppression(order[kept], suppressed_by)


_SPARSE_PAIRS_PER_BOX = 512
_PAIR_CHUNK = 4096  # candidate pairs per vectorized step: small arrays, no large allocations per call


def _overlap_pairs(visit: np.ndarray, iou_threshold: float, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """All pairs ``(a, b)``, ``a < b`` positions in ``visit``, with IoU(a, b) > threshold; None beyond ``limit`` candidates.

    Needs finite boxes and ``0 <= threshold <= 1``. Boxes are sorted by x1; box p (the one with the
    smaller x1) can only exceed the threshold with a box q whose x1 lies in ``[x1_p, x2_p - t * w_p)``
    and whose vertical overlap exceeds ``t * h_p`` (IoU <= overlap / side of p). Both bounds are
    loosened by a relative 1e-6 (and the x bound by 1e-12 of the coordinates) so that rounding never
    drops a pair; every candidate is then tested with the same float IoU as ``_iou_above``.
    """
    t = iou_threshold
    n = visit.shape[1]
    by_x = np.argsort(visit[0], kind="stable")
    x1, y1, x2, y2, area = visit[:, by_x]
    end = x2 - t * (x2 - x1) * (1 - 1e-6) + 1e-12 * (np.abs(x1) + np.abs(x2))
    np.minimum(end, x2, out=end)
    y_needed = t * (y2 - y1) * (1 - 1e-6)
    counts = np.searchsorted(x1, end, side="left") - np.arange(1, n + 1)
    np.maximum(counts, 0, out=counts)
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1]) if n else 0
    if total > limit:
        return None
    found_a, found_b = [], []
    # rows p0..p1 of the sorted boxes whose candidates fill about one chunk
    cuts = np.searchsorted(cumulative, np.arange(_PAIR_CHUNK, total, _PAIR_CHUNK), side="left") + 1
    for p0, p1 in zip([0, *cuts.tolist()], [*cuts.tolist(), n]):
        per_row = counts[p0:p1]
        size = int(per_row.sum())
        if size == 0:
            continue
        rows = np.arange(p0, p1)
        p = np.repeat(rows, per_row)
        # the k-th candidate of row p is p + 1 + k; its index in this chunk is start(p) + k
        q = np.arange(size) + np.repeat(rows + 1 - (np.cumsum(per_row) - per_row), per_row)
        high = np.minimum(y2[p], y2[q])
        high -= np.maximum(y1[p], y1[q])
        near = np.flatnonzero(high > y_needed[p])
        p, q = p[near], q[near]
        over = _iou_of_pairs(x1, y1, x2, y2, area, p, q) > t
        found_a.append(p[over])
        found_b.append(q[over])
    if not found_a:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    a, b = by_x[np.concatenate(found_a)], by_x[np.concatenate(found_b)]
    return np.minimum(a, b), np.maximum(a, b)


def _iou_of_pairs(x1, y1, x2, y2, area, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """IoU of boxes ``p[i]`` and ``q[i]``, the same float operations as ``_iou_above``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        width = np.minimum(x2[p], x2[q])
        width -= np.maximum(x1[p], x1[q])
        np.maximum(width, 0.0, out=width)
        height = np.minimum(y2[p], y2[q])
        height -= np.maximum(y1[p], y1[q])
        np.maximum(height, 0.0, out=height)
        width *= height
        union = area[p] + area[q]
        union -= width
        return width / union


def _greedy_on_pairs(n: int, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The greedy pass over overlap pairs ``first[i] < second[i]`` (visiting positions).

    A box is kept exactly when no kept box before it overlaps it. Decided in rounds, all boxes at
    once: a box whose earlier neighbours are all decided and none kept is kept; a box with a kept
    earlier neighbour is removed. Clustered boxes settle in a few rounds; a long chain of overlaps
    past ``_ROUNDS`` finishes with the one-box-at-a-time pass. Returns kept positions (ascending)
    and, per position, the first kept box overlapping it (the one that suppressed it) or -1.
    """
    state = np.zeros(n, dtype=np.int8)  # 0 undecided, 1 kept, 2 removed
    waiting = np.empty(n, dtype=bool)
    for _ in range(_ROUNDS):
        state[second[state[first] == 1]] = 2
        waiting[:] = False
        waiting[second[state[first] == 0]] = True
        ready = (state == 0) & ~waiting
        if not ready.any():
            break
        state[ready] = 1
    else:
        state = _greedy_one_by_one(n, first, second)
    kept = np.flatnonzero(state == 1)
    by_kept = state[first] == 1
    by = np.full(n, n, dtype=np.int64)
    np.minimum.at(by, second[by_kept], first[by_kept])
    by[by == n] = -1
    return kept, by


_ROUNDS = 32


def _greedy_one_by_one(n: int, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Kept (1) or removed (2) per position: the greedy pass box by box over the overlap pairs."""
    ordered = np.argsort(first, kind="stable")
    first, second = first[ordered], second[ordered]
    starts = np.flatnonzero(np.diff(first, prepend=-1))  # where each box's run of pairs starts
    targets = second.tolist()
    removed = bytearray(n)
    for u, begin, end in zip(first[starts].tolist(), starts.tolist(), [*starts[1:].tolist(), len(first)]):
        if not removed[u]:
            for v in targets[begin:end]:
                removed[v] = 1
    return np.frombuffer(removed, dtype=np.uint8).astype(np.int8) + 1


def _greedy_blocked(visit: np.ndarray, iou_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The greedy pass computed block by block, for any boxes and threshold.

    ``_BLOCK`` boxes of the order at a time (like the blocked NMS of GPU implementations): one
    vectorized IoU test of the block against every box kept so far, one of the block against
    itself, then a sweep through the block on bit sets (Python ints). Returns kept positions and,
    per position, the position of the box that suppressed it or -1.
    """
    n = visit.shape[1]
    by_all = np.full(n, -1, dtype=np.int64)
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
        by_all[start:start + size] = by
    return kept[:n_kept], by_all


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
