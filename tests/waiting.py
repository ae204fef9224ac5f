"""Waiting on a condition instead of sleeping for a guessed time (developers' guide: no sleep waits in tests)."""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

T = TypeVar("T")


def until(condition: Callable[[], T], timeout_s: float = 60.0, every_s: float = 0.05, what: str = "") -> T:
    """Poll ``condition`` until it returns a true value (returned); fail naming ``what`` after ``timeout_s``.

    The timeout only bounds a hung test: a loaded machine makes the wait longer, never the test wrong."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout_s:g} s: {what or condition}")
        pause.wait(every_s)
    return value
