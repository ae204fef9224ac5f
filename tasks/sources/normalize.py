"""Value normalization shared by the source readers (labels, integer ids, numbers)."""

from __future__ import annotations

import math
import re

_WHITESPACE = re.compile(r"\s+")


def normalize_label(value: object) -> str | None:
    """Strip, lowercase and collapse internal whitespace; None for non-strings and empty text."""
    if not isinstance(value, str):
        return None
    text = _WHITESPACE.sub(" ", value).strip().lower()
    return text or None


def collapse_spaces(value: str) -> str:
    """Collapse runs of whitespace to one space and strip (case kept)."""
    return _WHITESPACE.sub(" ", value).strip()


def as_int_id(value: object) -> int | None:
    """A non-negative integer id from an int, an integral float or a digit string; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    if isinstance(value, str):
        text = value.strip()
        return int(text) if text.isascii() and text.isdigit() else None
    return None


def as_number(value: object) -> float | None:
    """A finite float from an int or float (never from bool or text); else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
