"""A Dask worker preload that puts the worker on another host as far as the flow's loopback goes.

The addresses in ``$RVQA_TEST_ELSEWHERE`` (``127.0.0.1:PORT,...``) are servers on the flow's machine: a
worker on another host that connects to its own 127.0.0.1 there finds nothing listening, so here every
connect to them is refused, as that host's kernel would (an audit hook on ``socket.connect``, which
every client in the process goes through). The scheduler, the other workers and S3 stay reachable,
as they are from a real remote worker.
"""

from __future__ import annotations

import errno
import os
import socket
import sys

ENV = "RVQA_TEST_ELSEWHERE"


def _refuse_elsewhere(event: str, args: tuple) -> None:
    if event != "socket.connect":
        return
    address = args[1]
    if isinstance(address, tuple) and f"{address[0]}:{address[1]}" in os.environ.get(ENV, "").split(","):
        raise ConnectionRefusedError(errno.ECONNREFUSED, f"nothing listens on {address[0]}:{address[1]} on this host")


def dask_setup(worker) -> None:
    sys.addaudithook(_refuse_elsewhere)


def reaches(host: str, port: int) -> bool:
    """Whether this process can open a TCP connection to ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError:
        return False
    return True
