"""COCO RLE helpers shared by the stages that read or make masks."""

from __future__ import annotations

from typing import Sequence

import numpy as np

# pycocotools' area()/encode() keep the mask count of one call in a uint8 under numpy 2: more than
# 255 masks at once raise OverflowError, and SA-1B images often hold more.
MASKS_PER_CALL = 255


def areas(rles: Sequence[dict]) -> np.ndarray:
    """Pixels covered by each COCO RLE (``{"size": [h, w], "counts": str | bytes}``), as float64."""
    from pycocotools import mask as mask_utils

    if not len(rles):
        return np.zeros(0, dtype=np.float64)
    parts = [mask_utils.area(list(rles[i:i + MASKS_PER_CALL])) for i in range(0, len(rles), MASKS_PER_CALL)]
    return np.concatenate(parts).astype(np.float64, copy=False)
