"""The shape every answer category returns: answer, reason, d1, d2, d3 (one row per question)."""

from __future__ import annotations

import numpy as np
import polars as pl


def choice_frame(rendered: pl.Series, reason: np.ndarray) -> pl.DataFrame:
    """Split ``rendered`` (answers, then first, second and third distractors, n each) into columns;
    ``reason`` holds a reject reason or None per question."""
    n = len(reason)
    return pl.DataFrame(
        {
            "answer": rendered[:n],
            "reason": pl.Series(reason.tolist(), dtype=pl.String),
            "d1": rendered[n : 2 * n],
            "d2": rendered[2 * n : 3 * n],
            "d3": rendered[3 * n :],
        }
    )
