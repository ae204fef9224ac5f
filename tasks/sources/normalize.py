"""Value normalization shared by the source readers (labels, integer ids, numbers)."""

from __future__ import annotations

import math


def normalize_label(value: object) -> str | None:
    """Strip, lowercase and collapse internal whitespace; None for non-strings and empty text."""
    if type(value) is not str:
        return None
    return " ".join(value.lower().split()) or None


def collapse_spaces(value: str) -> str:
    """Collapse runs of whitespace to one space and strip (case kept)."""
    return " ".join(value.split())


MAX_ID = 2**63 - 1  # ids are stored as int64


def as_int_id(value: object) -> int | None:
    """A non-negative integer id (at most MAX_ID) from an int, an integral float or a digit string; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        number = int(value) if value.is_integer() else -1
    elif isinstance(value, str):
        text = value.strip()
        number = int(text) if text.isascii() and text.isdigit() and len(text) <= 19 else -1
    else:
        return None
    return number if 0 <= number <= MAX_ID else None


def is_number(value: object) -> bool:
    """True for an int or a finite float (never bool or text)."""
    kind = type(value)
    return kind is int or (kind is float and math.isfinite(value))  # type: ignore[arg-type]


def as_number(value: object) -> float | None:
    """A finite float from an int or float (never from bool or text); else None."""
    return float(value) if is_number(value) else None  # type: ignore[arg-type]
