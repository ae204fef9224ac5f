"""Grove (VistaQA section 4.1): answer score S_a, mask score S_m, each floored at EPSILON, per-sample geometric mean.

S_m(P, G) is 1 when both the predicted masks P and the ground-truth masks G are empty, 0 when G is empty and P
is not, else the sum of the IoUs of the Hungarian matching of P and G divided by max(|P|, |G|). IoUs are
computed on COCO RLEs by pycocotools, one call per image for all its questions' distinct masks at once (a
mask several questions predict, e.g. one object's, is one row); the matching is
scipy's ``linear_sum_assignment`` on each question's block of that matrix.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np
import polars as pl
from scipy.optimize import linear_sum_assignment

from reasonvqa import masks

EPSILON = 0.1  # VistaQA's floor (section 4.1, its sensitivity study in appendix A.3)


def mask_score(ious: np.ndarray) -> float:
    """S_m of one sample from its ``(|P|, |G|)`` IoU matrix."""
    predicted, truth = ious.shape
    if truth == 0:
        return 1.0 if predicted == 0 else 0.0
    if predicted == 0:
        return 0.0
    rows, cols = linear_sum_assignment(ious, maximize=True)
    return float(ious[rows, cols].sum() / max(predicted, truth))


def grove(answer_scores: np.ndarray, mask_scores: np.ndarray, epsilon: float = EPSILON) -> np.ndarray:
    """Per-sample Grove: the geometric mean of S_a and S_m, each floored at ``epsilon``."""
    return np.sqrt(np.maximum(answer_scores, epsilon) * np.maximum(mask_scores, epsilon))


def mask_scores(image_ids: Sequence[str], truth_ids: Sequence[Sequence[str]], predicted: Sequence[list[dict]],
                regions: dict[str, dict]) -> np.ndarray:
    """S_m of each sample (its image, ground-truth region ids, predicted compressed RLEs); NaN for a sample whose
    ground truth names a region ``regions`` lacks (not scorable). One IoU call per image."""
    out = np.full(len(image_ids), np.nan)
    by_image: dict[str, list[int]] = defaultdict(list)
    for index, image_id in enumerate(image_ids):
        by_image[image_id].append(index)
    for samples in by_image.values():
        scorable = [i for i in samples if all(r in regions for r in truth_ids[i])]
        truth = sorted({r for i in scorable for r in truth_ids[i]})
        column = {region: c for c, region in enumerate(truth)}
        distinct: dict[tuple, int] = {}  # a mask several questions predict is one row of the matrix
        rows_of = [[distinct.setdefault((tuple(rle["size"]), rle["counts"]), len(distinct)) for rle in predicted[i]]
                   for i in scorable]
        stacked = [dict(size=list(size), counts=counts) for size, counts in distinct]
        ious = masks.coco_iou_matrix(stacked, [regions[r] for r in truth])
        for i, rows in zip(scorable, rows_of):
            out[i] = mask_score(ious[rows][:, [column[r] for r in truth_ids[i]]])
    return out


def score_grove(rows: pl.DataFrame, answer_scores: np.ndarray, predicted: Sequence[list[dict]],
                regions: dict[str, dict]) -> pl.DataFrame:
    """Per sample of ``rows`` (question_id, image_id, evidence_region_ids, task_type, visual_domain,
    is_hallucination): s_a, s_m and grove; s_m and grove null where the ground truth is not scorable."""
    truth = [ids or [] for ids in rows["evidence_region_ids"].to_list()]
    s_m = mask_scores(rows["image_id"].to_list(), truth, predicted, regions)
    scores = grove(np.asarray(answer_scores, dtype=np.float64), s_m)
    return rows.select("question_id", "task_type", "visual_domain", "is_hallucination").with_columns(
        s_a=pl.Series(answer_scores, dtype=pl.Float64), s_m=pl.Series(s_m).fill_nan(None),
        grove=pl.Series(scores).fill_nan(None))
