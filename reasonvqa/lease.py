"""The build lock of a work folder on an fsspec URL: a lease object, created exclusively, renewed while held.

An object store has no ``fcntl``. The lock is the object ``<work>/.lock``, created with an exclusive
PUT (``pipe_file(mode="create")``: S3's ``If-None-Match: *``), so of two builds exactly one creates it.
It holds the owner, its ttl and a renewal count. A thread of the holder rewrites it every ``ttl / 3``
*conditionally* (S3 ``If-Match`` on the ETag of its own last write), retrying a failed request with
backoff; a renewal refused because the object changed or vanished, or no renewal for a whole ttl,
means the lease is lost: ``Lease.lost`` is set, the build checks it between stages (``Lease.check``)
and the ``with`` block raises ``LeaseLost`` on exit, naming the lease.

Only backends known to honour create-if-absent are used (``EXCLUSIVE_CREATE``: fsspec's default
``pipe_file(mode="create")`` checks then writes, which two builds can both pass), and each build first
probes its endpoint: an object created twice must fail the second time (``require_exclusive_create``;
an S3-compatible server that ignores ``If-None-Match`` is refused). A backend without ``If-Match`` (gs)
renews by comparing, writing and reading back, which leaves a narrow race its next renewal detects.

A waiting build never compares the holder's clock with its own: it takes a lease for dead only after
seeing the same object (its ETag) unchanged for the holder's ttl on its own clock, and takes it over
with one conditional PUT on that ETag, so of two waiters, or a waiter and a late renewal, one wins.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from reasonvqa.errors import UsageError
from reasonvqa.locks import LockHeldError

log = logging.getLogger(__name__)
TTL_S = 60.0
POLL_S = 2.0
EXCLUSIVE_CREATE = ("s3", "s3a", "gs", "gcs")  # fsspec protocols whose pipe_file(mode="create") is atomic
IF_MATCH = ("s3", "s3a")  # and those whose pipe_file takes IfMatch (a conditional overwrite)


class NoExclusiveCreate(UsageError):
    """The work folder's backend cannot create an object only if it is absent."""


class LeaseLost(RuntimeError):
    """Another build took the lease over (or it could not be renewed) while this build held it."""


@dataclass
class Lease:
    """A held lease: ``lost`` is set by the renewing thread when the lease is no longer this build's."""

    url: str
    key: str
    owner: str
    lost: threading.Event = field(default_factory=threading.Event)
    why: str = ""

    def lose(self, why: str) -> None:
        self.why = why
        self.lost.set()
        log.error("the lease %s/.lock of %s is lost: %s", self.url, self.owner, why)

    def check(self) -> None:
        """Raise LeaseLost when the lease was lost (a build calls it between stages)."""
        if self.lost.is_set():
            raise LeaseLost(f"build work folder {self.url}: this build ({self.owner}) lost its lease {self.url}/.lock "
                            f"({self.why}); another build may be writing the work folder, so this one stops")


def _body(owner: str, ttl: float, renewal: int) -> bytes:
    # the writer's clock is for people reading the object; no reader compares it with its own
    return json.dumps({"owner": owner, "ttl": ttl, "renewal": renewal, "written": time.time()}).encode()


def _create(fs, key: str, data: bytes, url: str) -> str | None:
    """Create ``key`` only if absent: its ETag (or "" when the backend gives none); None when it exists."""
    try:
        written = fs.pipe_file(key, data, mode="create")
    except FileExistsError:
        return None
    except (NotImplementedError, TypeError, ValueError) as error:
        raise NoExclusiveCreate(f"work folder {url}: its backend cannot create an object exclusively ({error}); "
                                f"a work folder URL needs that for the build lock (s3:// does)") from None
    return _etag(written)


def _etag(written: Any) -> str:
    return written.get("ETag", "") if isinstance(written, dict) else ""


def _state(fs, key: str) -> tuple[str, dict] | None:
    """(tag, content) of the lease object, None when absent: the tag is its ETag, else its bytes."""
    fs.invalidate_cache(key)
    try:
        etag = fs.info(key).get("ETag") or ""
        data = fs.cat_file(key)
    except FileNotFoundError:
        return None
    try:
        content = json.loads(data)
    except ValueError:
        content = {}
    return etag or data.decode("utf-8", "replace"), content if isinstance(content, dict) else {}


def _protocols(fs) -> set[str]:
    return set(fs.protocol) if isinstance(fs.protocol, (tuple, list)) else {fs.protocol}


def require_exclusive_create(fs, root: str, url: str) -> None:
    """Refuse (NoExclusiveCreate) a backend not known to create an object only if absent, or an endpoint
    that creates one probe object twice."""
    if not _protocols(fs) & set(EXCLUSIVE_CREATE):
        raise NoExclusiveCreate(f"work folder {url}: its backend ({'/'.join(sorted(_protocols(fs)))}) is not known to "
                                f"create an object only if it is absent, which the build lock needs; "
                                f"use {', '.join(p + '://' for p in EXCLUSIVE_CREATE)}")
    probe = f"{root.rstrip('/')}/.lock-probe-{uuid.uuid4().hex}"
    try:
        if _create(fs, probe, b"", url) is None or _create(fs, probe, b"", url) is not None:
            raise NoExclusiveCreate(f"work folder {url}: its endpoint created the object {probe} twice, so it ignores "
                                    f"create-if-absent (If-None-Match) and cannot hold the build lock")
    finally:
        with contextlib.suppress(FileNotFoundError):
            fs.rm_file(probe)


def _replace(fs, key: str, data: bytes, tag: str) -> str | None:
    """Overwrite ``key`` only if it is still the version ``tag``: the new tag; None when it changed or
    vanished. Other errors (a failed request) propagate, for the caller to retry."""
    if not _protocols(fs) & set(IF_MATCH):
        return _replace_checked(fs, key, data, tag)
    try:
        written = fs.pipe_file(key, data, IfMatch=tag)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.EINVAL and "pre-condition" in str(error):  # s3fs's PreconditionFailed (412)
            return None
        raise
    return _etag(written)


def _replace_checked(fs, key: str, data: bytes, tag: str) -> str | None:
    """``_replace`` without a conditional overwrite: compare, write, read back."""
    state = _state(fs, key)
    if state is None or state[0] != tag:
        return None
    fs.pipe_file(key, data)
    state = _state(fs, key)
    return state[0] if state is not None and state[1] == json.loads(data) else None


@contextlib.contextmanager
def lease_lock(url: str, what: str, *, wait: bool = True, ttl: float | None = None, build: str | None = None,
               on_wait: Callable[[str], None] | None = None) -> Iterator[Lease]:
    """Hold the lease ``<url>/.lock`` for the ``with`` block (see the module doc); ``wait`` as ``exclusive_lock``.
    ``ttl`` defaults to ``TTL_S``; ``build`` names the build in the owner (default a fresh id). Raises
    LeaseLost on exit when it was lost."""
    from reasonvqa.storage import filesystem

    ttl = ttl or TTL_S
    fs, root = filesystem(url)
    require_exclusive_create(fs, root, url)
    lease = Lease(url, f"{root.rstrip('/')}/.lock",
                  f"{socket.gethostname()}:{os.getpid()}:{build or uuid.uuid4().hex[:8]}")
    tag = _acquire(fs, lease, ttl, wait, what, on_wait)
    stop = threading.Event()
    renewer = threading.Thread(target=_renew, args=(fs, lease, ttl, tag, stop), daemon=True, name="lease-renewer")
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join()
        if not lease.lost.is_set():
            _release(fs, lease)
    lease.check()


def _release(fs, lease: Lease) -> None:
    """Delete the lease object if it is still this build's (a failure leaves it to expire for waiters)."""
    try:
        if ((_state(fs, lease.key) or ("", {}))[1]).get("owner") == lease.owner:
            fs.rm_file(lease.key)
    except OSError as error:
        log.warning("could not remove the lease %s (%s): a waiting build takes it after its ttl", lease.key, error)


def _acquire(fs, lease: Lease, ttl: float, wait: bool, what: str, on_wait: Callable[[str], None] | None) -> str:
    """Create the lease, or take over one left unchanged for its holder's ttl: the tag of this build's lease."""
    told, seen = False, None  # seen: (tag, when this process first saw it, by its own clock)
    while True:
        tag = _create(fs, lease.key, _body(lease.owner, ttl, 0), lease.url)
        if tag is not None:
            return tag
        state = _state(fs, lease.key)
        if state is None:
            continue  # released between the two calls
        held_tag, held = state
        now = time.monotonic()
        if seen is None or seen[0] != held_tag:
            seen = (held_tag, now)
        elif now - seen[1] >= float(held.get("ttl", ttl)):
            log.warning("%s %s: taking over the lease of %s, unchanged for %.1f s", what, lease.url,
                        held.get("owner"), now - seen[1])
            tag = _replace(fs, lease.key, _body(lease.owner, ttl, 0), held_tag)
            if tag is not None:
                return tag
            seen = None  # renewed or taken meanwhile
            continue
        message = f"{what} {lease.url} is in use by {held.get('owner', 'another build')} (lease {lease.url}/.lock)"
        if not wait:
            raise LockHeldError(message)
        if not told:
            (on_wait or log.warning)(f"{message}; waiting for it to finish")
            told = True
        time.sleep(POLL_S)


def _renew(fs, lease: Lease, ttl: float, tag: str, stop: threading.Event) -> None:
    """Rewrite the lease every ``ttl / 3`` on the version this build last wrote; set ``lease.lost`` when it
    was replaced or removed, or when no renewal got through for a whole ttl (a waiter may then take it)."""
    renewal, last_ok = 0, time.monotonic()
    while not stop.wait(ttl / 3):
        renewal += 1
        data, delay = _body(lease.owner, ttl, renewal), ttl / 30
        while True:
            started = time.monotonic()
            try:
                new_tag = _replace(fs, lease.key, data, tag)
                if new_tag is None:  # a write that landed though its answer was lost leaves our own renewal there
                    state = _state(fs, lease.key)
                    if state is not None and state[1] == json.loads(data):
                        new_tag = state[0]
            except Exception as error:  # a failed request: retry until the lease could have been taken
                if time.monotonic() - last_ok >= ttl:
                    lease.lose(f"no renewal got through for {ttl:g} s, the last error: {error}")
                    return
                log.warning("renewing the lease %s failed (%s); retrying in %.2f s", lease.key, error, delay)
                if stop.wait(delay):
                    return
                delay = min(delay * 2, ttl / 6)
                continue
            break
        if new_tag is None:
            lease.lose("another build replaced or removed it")
            return
        tag, last_ok = new_tag, started
