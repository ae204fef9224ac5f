import json
import threading
import time

import numpy as np
import pytest

from reasonvqa.call_cache import CallCache, canonical_key


def test_finished_calls_replay_after_reopening_and_a_torn_line_is_cut(tmp_path):
    path = tmp_path / "calls.jsonl"
    with CallCache(path, fingerprint="a") as cache:
        assert cache.call("f", {"x": 1}, lambda: (1, "a")) == [1, "a"]
        assert cache.call("f", {"x": 2}, lambda: None) is None
    with path.open("ab") as handle:
        handle.write(b'{"k":"abc","v"')  # a process killed mid-write
    with CallCache(path, fingerprint="a") as again:
        assert len(again) == 2
        assert again.call("f", {"x": 1}, lambda: 1 / 0) == [1, "a"] and again.hits == 1
        assert again.call("f", {"x": 3}, lambda: 3) == 3  # appended after the cut, not onto the torn line
    with CallCache(path, fingerprint="a") as third:
        assert len(third) == 3 and third.call("f", {"x": 3}, lambda: 1 / 0) == 3


def test_a_cache_of_another_fingerprint_is_discarded(tmp_path):
    with CallCache(tmp_path / "calls.jsonl", fingerprint="model-a") as cache:
        cache.call("f", 1, lambda: "from a")
    with CallCache(tmp_path / "calls.jsonl", fingerprint="model-b") as cache:
        assert len(cache) == 0 and cache.call("f", 1, lambda: "from b") == "from b"


def test_bytes_and_arrays_round_trip_and_the_first_answer_equals_the_replayed_one(tmp_path):
    mask = np.arange(12, dtype=np.uint8).reshape(3, 4)
    value = {"png": b"\x89PNG\x00\xff", "mask": mask, "score": np.float32(0.5)}
    with CallCache(tmp_path / "calls.jsonl") as cache:
        first = cache.call("seg", {"image": b"\x00\x01"}, lambda: value)
    with CallCache(tmp_path / "calls.jsonl") as cache:
        replayed = cache.call("seg", {"image": b"\x00\x01"}, lambda: 1 / 0)
    for got in (first, replayed):
        assert got["png"] == b"\x89PNG\x00\xff" and got["score"] == 0.5
        assert got["mask"].dtype == np.uint8 and np.array_equal(got["mask"], mask)


def test_keys_are_canonical_and_refuse_types_without_a_stable_text():
    assert canonical_key("f", {"a": 1, "b": [1, 2]}) == canonical_key("f", {"b": (1, 2), "a": 1})
    assert canonical_key("f", {"a": 1}) != canonical_key("g", {"a": 1})
    assert canonical_key("f", b"x") != canonical_key("f", "x")
    with pytest.raises(TypeError, match="cannot store a object"):
        canonical_key("f", {"a": object()})


def test_threads_asking_the_same_call_run_it_once(tmp_path):
    runs = []

    def slow(x):
        runs.append(x)
        time.sleep(0.1)
        return x * 10

    with CallCache(tmp_path / "calls.jsonl") as cache:
        results = {}
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, cache.call("f", i % 3, lambda: slow(i % 3))))
                   for i in range(9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(runs) == [0, 1, 2] and results == {i: (i % 3) * 10 for i in range(9)}
        assert (cache.misses, cache.hits) == (3, 6)
    assert len(CallCache(tmp_path / "calls.jsonl")) == 3


def test_a_failed_call_is_not_recorded_and_its_waiters_see_the_error(tmp_path):
    with CallCache(tmp_path / "calls.jsonl") as cache:
        with pytest.raises(ZeroDivisionError):
            cache.call("f", 1, lambda: 1 / 0)
        assert len(cache) == 0 and cache.call("f", 1, lambda: 2) == 2


def test_an_oversized_result_is_refused(tmp_path):
    with CallCache(tmp_path / "calls.jsonl", max_entry_bytes=100) as cache:
        with pytest.raises(ValueError, match=r"result of 'embed' is \d+ bytes, over the 100-byte limit"):
            cache.call("embed", 1, lambda: "x" * 200)
        assert len(cache) == 0


def test_an_answer_older_than_max_age_is_computed_again_and_supersedes_the_old_one(tmp_path):
    now = [1_000_000.0]
    path = tmp_path / "calls.jsonl"
    with CallCache(path, clock=lambda: now[0]) as cache:
        assert cache.call("q", "select", lambda: "old", max_age_s=60) == "old"
        now[0] += 60
        assert cache.call("q", "select", lambda: 1 / 0, max_age_s=60) == "old"  # exactly max_age: still fresh
        assert cache.call("q", "select", lambda: 1 / 0) == "old"  # no bound: any age
        now[0] += 1
        assert not cache.has("q", "select", max_age_s=60) and cache.has("q", "select")
        assert cache.call("q", "select", lambda: "new", max_age_s=60) == "new"
        assert (cache.hits, cache.misses) == (2, 2)
    with CallCache(path, clock=lambda: now[0]) as again:
        assert len(again) == 1 and again.call("q", "select", lambda: 1 / 0, max_age_s=0) == "new"
    assert [json.loads(line).get("t") for line in path.read_text().splitlines()] == [None, 1_000_000.0, 1_000_061.0]


def test_a_line_without_its_time_counts_as_too_old_for_a_bounded_caller(tmp_path):
    path = tmp_path / "calls.jsonl"
    with CallCache(path) as cache:
        cache.call("q", "select", lambda: "answer")
    lines = path.read_text().splitlines()
    entry = json.loads(lines[1])
    entry["t"] = "yesterday"  # damaged (or written before lines carried their time)
    path.write_text(lines[0] + "\n" + json.dumps(entry) + "\n")
    with CallCache(path) as again:
        assert again.call("q", "select", lambda: 1 / 0) == "answer"
        assert again.call("q", "select", lambda: "fetched", max_age_s=3600) == "fetched"
