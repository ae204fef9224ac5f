"""Normalized exact match of free-form answers (ReasonVQA open-ended accuracy, Grove's S_a without a judge)."""

from __future__ import annotations

import polars as pl


def normalized(answers: pl.Series) -> pl.Series:
    """Lower case, punctuation and the articles a/an/the dropped, runs of spaces folded: "The Eiffel-Tower."
    and "eiffel tower" are the same answer (null stays null)."""
    text = answers.str.to_lowercase().str.replace_all(r"[^0-9a-z]+", " ").str.replace_all(r"\b(a|an|the)\b", " ")
    return text.str.replace_all(r"\s+", " ").str.strip_chars()


def exact_match(predicted: pl.Series, reference: pl.Series) -> pl.Series:
    """1.0 where the normalized prediction equals the normalized reference, else 0.0 (a null prediction: 0)."""
    return (normalized(predicted) == normalized(reference)).fill_null(False).cast(pl.Float64)
