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
from pathlib import Path
from typing import Callable, Iterator

log = logging.getLogger(__name__)


def _holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding="utf-8").strip()
    except OSError:
        return "another process"
    return f"pid {pid}" if pid.isdigit() else "another process"


@contextlib.contextmanager
def exclusive_lock(path: Path, what: str, *, wait: bool = True,
                   on_wait: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` block.

    If another process holds it: with ``wait`` block until it is released (telling ``on_wait``,
    default the log, who holds it); without, raise ``LockHeldError``.
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
            (on_wait or log.warning)(f"{message}; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


class LockHeldError(RuntimeError):
    """The lock is held by another process and waiting was not asked for."""
