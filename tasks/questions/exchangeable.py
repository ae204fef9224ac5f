"""Distractors a choice-only model cannot tell from the answer (numbers and dates).

Four distinct points are drawn on the answer's grid (its rendered precision) within ``span``
grid steps, and the set is shifted so that one of them, chosen uniformly by rank, is the answer.
The answer is then exchangeable with its distractors: every rule that looks at the choices alone
(closest to the mean, the median, shared trailing digits, the middle value) picks it with
probability 1/4. Where a bound (a positive quantity, the latest year) makes the drawn rank
impossible, the nearest possible rank is used; a row where no rank fits gets no distractors.
"""

from __future__ import annotations

import numpy as np

from reasonvqa.tasks.questions.hashing import below, draw


def sample_distinct(m: np.ndarray, seeds: np.ndarray, k: int, stream: int) -> np.ndarray:
    """``k`` distinct integers in [0, m) per row (m >= k), sorted ascending, shape (n, k)."""
    chosen = np.empty((len(m), 0), dtype=np.int64)
    for j in range(k):
        c = below(draw(seeds, stream + j), np.maximum(m - j, 1))
        for i in range(j):  # chosen is sorted: shift past every value already taken
            c = c + (c >= chosen[:, i])
        chosen = np.sort(np.concatenate([chosen, c[:, None]], axis=1), axis=1)
    return chosen


ATTEMPTS = 4  # draws of the four points before a row falls back to a plain window around the answer


def exchangeable_distractors(
    answer: np.ndarray, span: np.ndarray, room_below: np.ndarray, room_above: np.ndarray, seeds: np.ndarray, stream: int
) -> tuple[np.ndarray, np.ndarray]:
    """Three distractors per row as answer + integer offsets, and a mask of rows that got them.

    ``span``: the largest distance between two choices (grid steps, >= 3); ``room_below`` /
    ``room_above``: how far a distractor may lie below / above the answer. A row whose bounds fit
    no drawn rank in ``ATTEMPTS`` draws gets three distinct offsets from the window
    [-room_below, room_above] instead; a row with fewer than 3 steps of room gets none.
    """
    n = len(answer)
    rows = np.arange(n)
    room_below = np.minimum(room_below, span).astype(np.int64)
    room_above = np.minimum(room_above, span).astype(np.int64)
    span = np.minimum(span, room_below + room_above).astype(np.int64)
    ok = room_below + room_above >= 3
    wanted = below(draw(seeds, stream + 7), np.full(n, 4))
    others = np.zeros((n, 3), dtype=np.int64)
    done = ~ok
    for attempt in range(ATTEMPTS):
        points = sample_distinct(np.where(ok, np.maximum(span, 3) + 1, 4), seeds, 4, stream + 10 * attempt)
        fits = ((points - points[:, :1]) <= room_below[:, None]) & ((points[:, 3:] - points) <= room_above[:, None])
        distance = np.abs(np.arange(4)[None, :] - wanted[:, None]) + np.where(fits, 0, 100)
        rank = np.argmin(distance, axis=1)
        hit = ~done & fits[rows, rank]
        offsets = points - points[rows, rank][:, None]
        mine = np.sort(np.where(np.arange(4)[None, :] == rank[:, None], np.iinfo(np.int64).max, offsets), axis=1)[:, :3]
        others = np.where(hit[:, None], mine, others)
        done |= hit
    window = sample_distinct(np.where(ok, room_below + room_above, 3), seeds, 3, stream + 50) - room_below[:, None]
    window = window + (window >= 0)  # skip offset 0 (the answer)
    others = np.where(done[:, None], others, window)
    return answer[:, None] + np.where(ok[:, None], others, 1 + np.arange(3)[None, :]), ok
