"""The post-NMS filters of GroundingME (section 3.2.1): drop boxes over half the image, then rare classes."""

from __future__ import annotations

import numpy as np

from reasonvqa.tasks.proposals.nms import class_counts

BOX_TOO_LARGE = "box_too_large"
CLASS_TOO_FEW_INSTANCES = "class_too_few_instances"


def box_area_fraction(boxes: np.ndarray, width: float, height: float) -> np.ndarray:
    """Area of each XYXY box (clipped to the image) as a fraction of the image area."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    w = np.clip(np.minimum(boxes[:, 2], width) - np.maximum(boxes[:, 0], 0.0), 0.0, None)
    h = np.clip(np.minimum(boxes[:, 3], height) - np.maximum(boxes[:, 1], 0.0), 0.0, None)
    return (w * h) / float(width * height)


def filter_reasons(boxes: np.ndarray, labels: np.ndarray, width: float, height: float,
                   max_area_fraction: float = 0.5, min_class_instances: int = 3) -> list[str | None]:
    """For each box, why it is dropped (``BOX_TOO_LARGE``, ``CLASS_TOO_FEW_INSTANCES``) or None.

    A box covering more than ``max_area_fraction`` of the image is dropped first; the
    classes are then counted over the boxes left, and every box of a class with fewer than
    ``min_class_instances`` of them is dropped. ``max_area_fraction >= 1`` or
    ``min_class_instances <= 1`` turn the respective filter off.
    """
    labels = np.asarray(labels, dtype=object)
    reasons: list[str | None] = [None] * len(labels)
    if not len(labels):
        return reasons
    too_large = box_area_fraction(boxes, width, height) > max_area_fraction
    for i in np.flatnonzero(too_large):
        reasons[i] = BOX_TOO_LARGE
    left = np.flatnonzero(~too_large)
    if left.size:
        counts = class_counts(labels[left])
        for i in left[counts < min_class_instances]:
            reasons[i] = CLASS_TOO_FEW_INSTANCES
    return reasons
