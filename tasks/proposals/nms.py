"""Non-maximum suppression in numpy: score-ordered NMS and GroundingME's class-count NMS.

Boxes are ``(N, 4)`` arrays of XYXY pixel corners. IoU follows torchvision's ``box_iou``:
``area = (x2 - x1) * (y2 - y1)`` (no +1), ``iou = inter / (area_a + area_b - inter)``; a pair
whose union is 0 has IoU NaN, which never exceeds a threshold, so it never suppresses.
"""

from __future__ import annotations

from collections import Counter
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
    overlapping pairs are found once in x1 windows within y1 bands (``_overlap_pairs``) and the
    greedy pass walks that sparse graph; otherwise, or when boxes are so stacked that the candidate
    pairs would outnumber ``_SPARSE_PAIRS_PER_BOX`` per box, the blocked dense sweep runs.
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
_PAIR_CHUNK = 16384  # candidate pairs per vectorized step: one step at 900 detector-like boxes


def _overlap_pairs(visit: np.ndarray, iou_threshold: float, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """All pairs ``(a, b)``, ``a < b`` positions in ``visit``, with IoU(a, b) > threshold; None beyond ``limit`` candidates.

    Needs finite boxes and ``0 <= threshold <= 1``. IoU <= overlap / side of either box along each
    axis, so of two boxes over the threshold, the one with the smaller x1 (p) has the other's x1 in
    ``[x1_p, x2_p - t * w_p)``, and the one with the smaller y1 has the other's y1 less than
    ``(1 - t)`` of its height above its own. The boxes are cut into bands by y1 (``_y_bands``) and
    sorted by band, then x1: p's candidates are x1 windows in its own band, in the bands above it
    that its height reaches and in the bands below that the tallest box reaches. Bounds are loosened
    by a relative 1e-6 (and 1e-12 of the coordinates) so that rounding never drops a pair; each
    candidate is then tested on its vertical overlap against both heights and finally with the same
    float IoU as ``_iou_above``.
    """
    t = iou_threshold
    n = visit.shape[1]
    x1, y1, x2, y2, _ = visit
    by_x = np.argsort(x1, kind="stable")
    xs = x1[by_x]
    end = x2 - t * (x2 - x1) * (1 - 1e-6) + 1e-12 * (np.abs(x1) + np.abs(x2))
    np.minimum(end, x2, out=end)
    x_end = np.searchsorted(xs, end[by_x], side="left")  # rank bound of each box's x1 window
    band, reach_up = _y_bands(y1[by_x], y2[by_x], t)
    if reach_up.any():
        sweep, rows, lo, hi = _banded_windows(xs, x_end, band, reach_up)
        order = by_x[sweep]
    else:  # one band: the boxes after it in x order
        order, rows, hi = by_x, np.arange(n), x_end
        lo = rows + 1
    counts = np.maximum(hi - lo, 0)
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1]) if n else 0
    if total > limit:
        return None
    x1, y1, x2, y2, area = visit[:, order]
    y_needed = t * (y2 - y1) * (1 - 1e-6)
    found_a, found_b = [], []
    step = np.arange(min(_PAIR_CHUNK, total) + int(counts.max(initial=0)))
    # rows r0..r1 whose candidates fill about one chunk
    cuts = np.searchsorted(cumulative, np.arange(_PAIR_CHUNK, total, _PAIR_CHUNK), side="left") + 1
    for r0, r1 in zip([0, *cuts.tolist()], [*cuts.tolist(), len(rows)]):
        per_row = counts[r0:r1]
        size = int(per_row.sum())
        if size == 0:
            continue
        # the k-th candidate of row r is lo[r] + k; its index in this chunk is start(r) + k
        q = np.repeat(lo[r0:r1] - (np.cumsum(per_row) - per_row), per_row)
        q += step[:size]
        at = rows[r0:r1]  # the row's own values are repeated, the candidates' gathered
        high = np.minimum(np.repeat(y2[at], per_row), y2.take(q))
        high -= np.maximum(np.repeat(y1[at], per_row), y1.take(q))
        near = np.flatnonzero(high > np.maximum(np.repeat(y_needed[at], per_row), y_needed.take(q)))
        p, q = np.repeat(at, per_row).take(near), q.take(near)
        over = _iou_of_pairs(x1, x2, area, p, q, np.maximum(high.take(near), 0.0)) > t
        found_a.append(p[over])
        found_b.append(q[over])
    if not found_a:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    a, b = order[np.concatenate(found_a)], order[np.concatenate(found_b)]
    return np.minimum(a, b), np.maximum(a, b)


def _banded_windows(xs: np.ndarray, x_end: np.ndarray, band: np.ndarray, reach_up: np.ndarray):
    """Candidate windows of boxes given in x order: the sweep order (by band, then x), and per window its row and range.

    ``x_end`` bounds each box's x1 window by rank in x order, ``band`` and ``reach_up`` come from
    ``_y_bands``. A row of windows per band looked at: own band (the boxes after it in the sweep
    order), bands above within its reach (x1 >= own x1), bands below within the tallest box's
    reach (x1 > own x1). Returns the x ranks in sweep order, and ``rows``, ``lo``, ``hi`` (sweep
    positions).
    """
    n = len(xs)
    key = band * (n + 1) + np.arange(n)  # band, then rank along x: distinct
    rank = np.argsort(key)  # the x rank of each box in sweep order
    key, base = key[rank], band[rank] * (n + 1)
    reach = int(reach_up.max())
    shifts = np.concatenate([np.arange(reach + 1), np.arange(-reach, 0)])[:, None]
    first = np.empty((len(shifts), n), dtype=np.int64)
    first[0] = rank + 1
    first[1:reach + 1], first[reach + 1:] = _tie_bounds(xs, rank)
    base = base + shifts * (n + 1)
    find = _sorted_finder(key, int(key[-1]) + 1)
    lo, hi = find(base + first), find(base + x_end[rank])
    np.copyto(hi[1:reach + 1], lo[1:reach + 1], where=shifts[1:reach + 1] > reach_up[rank])  # out of reach
    return rank, np.tile(np.arange(n), len(shifts)), lo.ravel(), hi.ravel()


_BAND_SPLIT = 3  # bands per reach of the tallest box: finer bands, fewer candidates, a few more lookups
_MAX_BANDS = 96
_BAND_MIN_BOXES = 128  # below this, one band: the extra lookups cost more than the candidates they save
_TABLE_MAX = 32768  # int32 entries (128 KB) of the position table of ``_sorted_finder``


def _y_bands(y1: np.ndarray, y2: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Band of every box by y1, and how many bands above its own a box over the threshold with it can lie.

    Of two boxes over the threshold, the one with the smaller y1 (b) has the other's y1 less than
    ``(1 - t) * h_b`` above its own (the vertical overlap exceeds ``t * h_b``). That reach plus 1e-6
    of the height and 4e-12 of the largest coordinate, so that rounding never moves a pair further
    apart, counted in bands; the band height is a ``_BAND_SPLIT``-th of the tallest box's reach.
    All zeros (one band) for few boxes or when the tallest reach spans all y1.
    """
    n = len(y1)
    if n == 0 or n < _BAND_MIN_BOXES:
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    low, high = float(y1.min()), float(y1.max())
    slack = 4e-12 * max(abs(low), abs(high), float(np.abs(y2).max()))
    reach = np.maximum(y2 - y1, 0.0)
    reach *= (1 - t + 1e-6) * (1 + 1e-9)
    reach += slack
    tallest = float(reach.max())
    height = max(tallest / _BAND_SPLIT, (high - low) / _MAX_BANDS)
    if height <= 0 or high - low < tallest:
        return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    bands = int((high - low) / height) + 1
    band = np.minimum(((y1 - low) / height).astype(np.int64), bands - 1)
    return band, np.ceil(reach / height).astype(np.int64)


def _sorted_finder(key: np.ndarray, stop: int):
    """``np.searchsorted(key, values, side="left")`` for distinct sorted non-negative ints ``key`` below ``stop``.

    A table of positions (one cumulative sum) when ``stop`` is small: a lookup per value instead of a
    binary search, whose mispredicted branches dominate at these sizes.
    """
    if stop > _TABLE_MAX:
        return lambda values: np.searchsorted(key, values, side="left")
    table = np.zeros(stop + 1, dtype=np.int32)
    table[key + 1] = 1
    np.cumsum(table, out=table)
    return lambda values: table[np.clip(values, 0, stop)]


def _tie_bounds(xs: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted ``xs`` and indices ``at``: the first index holding ``xs[at]``, and the one past the last."""
    n = len(xs)
    if n < 2 or (xs[1:] != xs[:-1]).all():
        return at, at + 1
    index = np.arange(n)
    new = np.empty(n, dtype=bool)
    new[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=new[1:])
    first = np.maximum.accumulate(np.where(new, index, 0))
    last = np.minimum.accumulate(np.where(np.roll(new, -1), index, n - 1)[::-1])[::-1]
    return first[at], last[at] + 1


def _iou_of_pairs(x1, x2, area, p: np.ndarray, q: np.ndarray, height: np.ndarray) -> np.ndarray:
    """IoU of boxes ``p[i]`` and ``q[i]`` given their vertical overlap clamped at 0, as ``_iou_above`` computes it."""
    with np.errstate(invalid="ignore", divide="ignore"):
        width = np.minimum(x2.take(p), x2.take(q))
        width -= np.maximum(x1.take(p), x1.take(q))
        np.maximum(width, 0.0, out=width)
        width *= height
        union = area.take(p) + area.take(q)
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
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


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
    labels = np.asarray(labels)
    if labels.dtype == object:  # Python objects: a dict is ~3x faster than np.unique's comparisons
        items = labels.tolist()
        count = Counter(items)
        return np.fromiter(map(count.__getitem__, items), dtype=np.int64, count=len(items))
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
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
