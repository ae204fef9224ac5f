"""Exclusive locks on work and release folders, so two builds never write the same files at once.

``fcntl.flock`` locks belong to an open file: the kernel drops them when the holder exits or
is killed, so a crashed build never leaves a stale lock behind. The lock file records the
holder's pid for the waiting message; its content is informational only.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)


def _holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding="utf-8").strip()
    except OSError:
        return "another process"
    return f"pid {pid}" if pid.isdigit() else "another process"


REPEAT_EVERY = 30.0  # seconds between "still waiting" lines


def tell_stderr(message: str) -> None:
    """A waiting line for the terminal (stderr, shown without --debug) and the log."""
    log.warning(message)
    print(f"warning: {message}", file=sys.stderr, flush=True)


def held_by(path: Path) -> str | None:
    """Who holds the lock file ``path`` now ("pid N"), or None when it is free or absent (never created here)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        return _holder(Path(path))
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive_lock(path: Path, what: str, *, wait: bool = True, on_wait: Callable[[str], None] | None = None,
                   repeat_every: float = REPEAT_EVERY) -> Iterator[Path]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` block.

    If another process holds it: with ``wait`` block until it is released, telling ``on_wait``
    (default: stderr and the log) at once who holds it and again every ``repeat_every`` seconds;
    without ``wait``, raise ``LockHeldError``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            message = f"{what} {path.parent} is in use by {_holder(path)} (lock {path})"
            if not wait:
                raise LockHeldError(message) from None
            _wait_telling(fd, path, message, on_wait or tell_stderr, repeat_every)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class LockHeldError(RuntimeError):
    """The lock is held by another process and waiting was not asked for."""


def _wait_telling(fd: int, path: Path, message: str, tell: Callable[[str], None], repeat_every: float) -> None:
    """Block on the lock in a helper thread; say so now and every ``repeat_every`` seconds until it is ours."""
    got = threading.Event()
    failed: list[BaseException] = []

    def take() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            failed.append(error)
        finally:
            got.set()

    threading.Thread(target=take, name=f"lock-wait {path.name}", daemon=True).start()
    tell(f"{message}; waiting for it to finish")
    waited = 0.0
    while not got.wait(repeat_every):
        waited += repeat_every
        tell(f"still waiting ({waited:.0f} s) for {_holder(path)} to release {path}")
    if failed:
        raise failed[0]
