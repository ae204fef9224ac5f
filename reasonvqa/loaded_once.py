"""``loaded_once``: ``functools.lru_cache`` for loaders that shard threads call at the same time.

``lru_cache`` does not hold concurrent first callers back: four shard threads asking for the bundled WordNet
table at once each read it (4 x 0.7 CPU s in a sample build). A loader decorated here computes each distinct
call once; callers that arrive meanwhile wait for that result. Only for loaders: every call takes the lock.
"""

from __future__ import annotations

import threading
from functools import lru_cache, wraps
from typing import Callable, TypeVar

Result = TypeVar("Result")


def loaded_once(maxsize: int | None = 8) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Decorator: ``lru_cache(maxsize)`` whose calls are made one at a time (``cache_clear`` kept)."""
    def decorate(function: Callable[..., Result]) -> Callable[..., Result]:
        cached = lru_cache(maxsize=maxsize)(function)
        lock = threading.RLock()  # re-entrant: a loader may call another call of itself

        @wraps(function)
        def call(*args, **kwargs) -> Result:
            with lock:
                return cached(*args, **kwargs)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call

    return decorate
