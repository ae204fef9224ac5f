"""The lease on moto's S3 server (127.0.0.1), with ttls short enough that renewals run within the test."""

import json
import threading
import time

import pytest

from reasonvqa import lease
from reasonvqa.locks import LockHeldError
from reasonvqa.storage import filesystem
from tests.moto_s3 import s3_filesystem, s3_server
from tests.waiting import until

# ttls in seconds: a renewal comes every ttl / 3 and a waiter takes a lease left unchanged for a whole ttl,
# so a renewing thread held up for a ttl on a loaded machine would rightly lose its lease. TTL is long
# against such stalls; the tests wait on renewal counts, not on times.
TTL = 2.5


@pytest.fixture(scope="module")
def s3():
    with s3_server("leases") as endpoint:
        yield endpoint


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch):
    monkeypatch.setattr(lease, "POLL_S", 0.05)


def content(key: str) -> dict:
    fs = s3_filesystem()
    return json.loads(fs.cat_file(key))


def other_build(url: str, got: list, **kwargs) -> threading.Thread:
    """A second build waiting for the lease: ``got`` gets the time it held it."""
    def run():
        with lease.lease_lock(url, "build work folder", **kwargs):
            got.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_lease_admits_one_build_and_is_gone_after_it(s3):
    with lease.lease_lock("s3://leases/w1", "build work folder", ttl=3, build="b1") as held:
        assert held.key == "leases/w1/.lock" and held.owner.endswith(":b1")
        with pytest.raises(LockHeldError, match=r"build work folder s3://leases/w1 is in use by .+:\d+:b1"):
            with lease.lease_lock("s3://leases/w1", "build work folder", wait=False):
                pass
    assert not s3_filesystem().exists("leases/w1/.lock")


def test_a_lease_is_released_when_the_build_raises(s3):
    with pytest.raises(ValueError, match="a stage failed"):
        with lease.lease_lock("s3://leases/w2", "build work folder", ttl=3):
            raise ValueError("a stage failed")
    assert not s3_filesystem().exists("leases/w2/.lock")


def test_renewals_keep_a_waiting_build_out_for_many_ttls(s3):
    got = []
    with lease.lease_lock("s3://leases/w3", "build work folder", ttl=TTL) as held:
        waiter = other_build("s3://leases/w3", got, ttl=TTL)
        # 7 renewals, 3 a ttl: over two ttls, after which the waiter would have taken a lease not renewed
        until(lambda: content(held.key)["renewal"] >= 7, what="seven renewals")
        released = time.monotonic()
        assert got == [] and waiter.is_alive()
        held.check()
    waiter.join(10)
    assert len(got) == 1 and got[0] >= released


def test_a_failed_renewal_is_retried_and_the_lease_kept(s3, monkeypatch):
    fs = filesystem("s3://leases/w4")[0]  # the instance lease_lock gets (fsspec caches it)
    real, failures = fs.pipe_file, []

    def flaky(path, data, **kwargs):
        if kwargs.get("mode") != "create" and not failures:  # the first renewal
            failures.append(path)
            raise OSError(5, "injected: connection reset")
        return real(path, data, **kwargs)

    monkeypatch.setattr(fs, "pipe_file", flaky)
    got = []
    with lease.lease_lock("s3://leases/w4", "build work folder", ttl=TTL) as held:
        waiter = other_build("s3://leases/w4", got, ttl=TTL)
        until(lambda: failures and content(held.key)["renewal"] >= 7, what="a failed renewal, then seven renewals")
        released = time.monotonic()
        assert failures == ["leases/w4/.lock"] and got == [] and waiter.is_alive()
        held.check()
    waiter.join(10)
    assert len(got) == 1 and got[0] >= released


def test_a_lease_taken_over_is_lost_and_the_build_fails_naming_it(s3):
    fs = s3_filesystem()
    with pytest.raises(lease.LeaseLost, match=r"s3://leases/w5: this build \(.+:b5\) lost its lease "
                                              r"s3://leases/w5/.lock \(another build replaced or removed it\)"):
        with lease.lease_lock("s3://leases/w5", "build work folder", ttl=0.6, build="b5") as held:
            fs.pipe_file("leases/w5/.lock", json.dumps({"owner": "thief:1:x", "ttl": 60}).encode())
            assert held.lost.wait(60)  # set at the next renewal
            with pytest.raises(lease.LeaseLost):
                held.check()  # what the flow calls between stages
    assert content("leases/w5/.lock")["owner"] == "thief:1:x"  # the other build's lease is left alone


def test_a_waiting_build_gets_the_lease_when_it_is_released(s3):
    told, got = [], []
    with lease.lease_lock("s3://leases/w6", "build work folder"):
        waiter = other_build("s3://leases/w6", got, on_wait=told.append)
        until(lambda: told, what="the waiter was told to wait")
        assert got == []
    waiter.join(10)
    assert len(got) == 1 and told and told[0].endswith("waiting for it to finish")


def test_a_dead_build_lease_is_taken_over_after_its_ttl_by_the_waiter_clock(s3):
    # written by a clock far ahead: its own expiry would say "alive" for a day; unchanged, it is dead all the same
    s3_filesystem().pipe_file("leases/w7/.lock", json.dumps(
        {"owner": "gone:1:x", "ttl": 0.5, "written": time.time() + 86400, "expires": time.time() + 86400}).encode())
    start = time.monotonic()
    with lease.lease_lock("s3://leases/w7", "build work folder", ttl=5) as held:
        assert time.monotonic() - start >= 0.5
        assert content(held.key)["owner"] == held.owner


def test_a_backend_not_known_to_create_exclusively_is_refused(s3):
    with pytest.raises(lease.NoExclusiveCreate, match=r"^work folder memory://w: its backend \(memory\) is not known "
                                                      r"to create an object only if it is absent"):
        with lease.lease_lock("memory://w", "build work folder"):
            pass


def test_an_endpoint_that_ignores_create_if_absent_is_refused(s3, monkeypatch):
    fs = filesystem("s3://leases/w8")[0]
    real = fs.pipe_file
    monkeypatch.setattr(fs, "pipe_file", lambda path, data, mode="overwrite", **kwargs: real(path, data, **kwargs))
    with pytest.raises(lease.NoExclusiveCreate, match=r"^work folder s3://leases/w8: its endpoint created the object "
                                                      r"leases/w8/.lock-probe-\w+ twice"):
        with lease.lease_lock("s3://leases/w8", "build work folder"):
            pass
    assert s3_filesystem().find("leases/w8") == []


def test_a_backend_without_if_match_renews_by_reading_back(s3, monkeypatch):
    monkeypatch.setattr(lease, "IF_MATCH", ())
    fs = s3_filesystem()
    with pytest.raises(lease.LeaseLost, match="another build replaced or removed it"):
        with lease.lease_lock("s3://leases/w9", "build work folder", ttl=TTL) as held:
            until(lambda: content(held.key)["renewal"] >= 2, what="two renewals")
            assert not held.lost.is_set()
            # the other build keeps its lease, as a live one does: without If-Match a renewal that compared just
            # before one of its writes can overwrite that write once, but it reads the next one back
            deadline = time.monotonic() + 60  # bounds a hung test only
            while not held.lost.is_set() and time.monotonic() < deadline:
                fs.pipe_file("leases/w9/.lock", json.dumps({"owner": "thief:1:x", "ttl": 60}).encode())
                held.lost.wait(0.2)
            assert held.lost.is_set()


def test_a_backend_whose_writes_take_no_create_mode_is_refused(s3, monkeypatch):
    fs = filesystem("s3://leases/w10")[0]
    real = fs.pipe_file

    def no_create_mode(path, data, mode="overwrite", **kwargs):
        if mode == "create":
            raise NotImplementedError("mode='create' is not supported")
        return real(path, data, **kwargs)

    monkeypatch.setattr(fs, "pipe_file", no_create_mode)
    with pytest.raises(lease.NoExclusiveCreate, match=r"^work folder s3://leases/w10: its backend cannot create an "
                                                      r"object exclusively \(mode='create' is not supported\)"):
        with lease.lease_lock("s3://leases/w10", "build work folder"):
            pass
    assert s3_filesystem().find("leases/w10") == []
