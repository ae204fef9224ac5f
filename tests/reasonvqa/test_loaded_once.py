"""``loaded_once``: concurrent first calls compute once; distinct arguments are cached apart."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from reasonvqa.loaded_once import loaded_once


def test_concurrent_first_callers_wait_for_one_computation():
    started = threading.Event()
    release = threading.Event()
    calls: list[str] = []

    @loaded_once(maxsize=4)
    def load(name: str) -> list[str]:
        calls.append(name)
        started.set()
        release.wait(timeout=30)  # the other callers arrive while this one is still loading
        return [name]

    with ThreadPoolExecutor(max_workers=4) as threads:
        first = threads.submit(load, "table")
        assert started.wait(timeout=30)
        others = [threads.submit(load, "table") for _ in range(3)]
        release.set()
        results = [first.result(timeout=30)] + [f.result(timeout=30) for f in others]
    assert calls == ["table"]
    assert all(result is results[0] for result in results)
    assert load("other") == ["other"] and calls == ["table", "other"]
    load.cache_clear()
    load("table")
    assert calls == ["table", "other", "table"]
