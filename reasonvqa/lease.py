"""The build lock of a work folder on an fsspec URL: a lease object, created exclusively, refreshed while held.

An object store has no ``fcntl``. The lock is the object ``<work>/.lock``, created with an exclusive
PUT (``pipe_file(mode="create")``: S3's ``If-None-Match: *``, which s3fs sends), so of two builds
exactly one creates it. It holds the owner and an expiry; a thread of the holder renews the expiry
every ``ttl / 3`` and the holder deletes it on leaving. A build that dies stops renewing: once
expired, the next build deletes and re-creates it (that takeover is a delete then an exclusive
create, so two builds racing for one expired lease could in rare cases both see the delete succeed;
the renewing thread reads the lease back and logs when it finds another owner).
A backend without exclusive create is refused rather than locked unsoundly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Callable, Iterator

from reasonvqa.errors import UsageError
from reasonvqa.locks import LockHeldError

log = logging.getLogger(__name__)
TTL_S = 60.0
POLL_S = 2.0


class NoExclusiveCreate(UsageError):
    """The work folder's backend cannot create an object only if it is absent."""


def _lease(owner: str, ttl: float) -> bytes:
    return json.dumps({"owner": owner, "expires": time.time() + ttl}).encode()


def _read(fs, key: str) -> dict | None:
    try:
        value = json.loads(fs.cat_file(key))
    except FileNotFoundError:
        return None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _create(fs, key: str, data: bytes, url: str) -> bool:
    """Create ``key`` only if absent; False when it exists."""
    try:
        fs.pipe_file(key, data, mode="create")
    except FileExistsError:
        return False
    except (NotImplementedError, TypeError, ValueError) as error:
        raise NoExclusiveCreate(f"work folder {url}: its backend cannot create an object exclusively ({error}); "
                                f"a work folder URL needs that for the build lock (s3:// does)") from None
    return True


@contextlib.contextmanager
def lease_lock(url: str, what: str, *, wait: bool = True, ttl: float = TTL_S,
               on_wait: Callable[[str], None] | None = None) -> Iterator[str]:
    """Hold the lease ``<url>/.lock`` for the ``with`` block (see the module doc); ``wait`` as ``exclusive_lock``."""
    from reasonvqa.storage import filesystem

    fs, root = filesystem(url)
    key = f"{root.rstrip('/')}/.lock"
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    told = False
    while not _create(fs, key, _lease(owner, ttl), url):
        held = _read(fs, key)
        if held is None:
            continue  # released between the two calls
        if held.get("expires", 0) < time.time():
            log.warning("%s %s: taking over the expired lease of %s", what, url, held.get("owner"))
            fs.rm_file(key)
            continue
        message = f"{what} {url} is in use by {held.get('owner', 'another build')} (lease {url}/.lock)"
        if not wait:
            raise LockHeldError(message)
        if not told:
            (on_wait or log.warning)(f"{message}; waiting for it to finish")
            told = True
        time.sleep(POLL_S)
    stop = threading.Event()
    renewer = threading.Thread(target=_renew, args=(fs, key, owner, ttl, stop), daemon=True, name="lease-renewer")
    renewer.start()
    try:
        yield key
    finally:
        stop.set()
        renewer.join()
        if (_read(fs, key) or {}).get("owner") == owner:
            fs.rm_file(key)


def _renew(fs, key: str, owner: str, ttl: float, stop: threading.Event) -> None:
    while not stop.wait(ttl / 3):
        held = _read(fs, key) or {}
        if held.get("owner") != owner:
            log.error("the lease %s is held by %s, not by this build (%s)", key, held.get("owner"), owner)
            return
        fs.pipe_file(key, _lease(owner, ttl))
