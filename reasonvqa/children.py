"""Child servers that die with the process that started them (Linux ``PR_SET_PDEATHSIG``).

A server started for one build (the Oxigraph mirror, a Prefect API) must not outlive the
build, also when the build is killed with SIGKILL and no ``finally`` runs. The command is
started through this module (``python -m reasonvqa.children <parent pid> <command...>``):
it asks the kernel to send SIGKILL when its parent dies, checks the parent is still alive
(it may have died before the request), then ``exec``s the command, which keeps the setting.
The request is made in the launcher, not in ``preexec_fn``, which is unsafe in a process
with threads (Prefect runs several).

The kernel sends the signal when the *thread* that forked the child ends, so start these
servers from a thread that lives as long as they should (the flow's, or the main thread).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable, Sequence

_PR_SET_PDEATHSIG = 1


def bind_to_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # the parent died between fork and prctl
        os._exit(1)


def popen_bound(command: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen(command)``, the child killed by the kernel when this process dies."""
    launcher = [sys.executable, "-m", "reasonvqa.children", str(os.getpid()), *command]
    return subprocess.Popen(launcher, **kwargs)


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Terminate ``process``; kill it if it has not exited after ``grace_s``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (a server may still race for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_answering(url: str, process: subprocess.Popen, timeout_s: float, *, exited: Callable[[int], Exception],
                   late: Callable[[], Exception], ready: Callable[[Any], bool] = lambda answer: answer.status == 200,
                   poll_s: float = 0.2) -> None:
    """Return once a GET of ``url`` gives an answer that is ``ready``; raise ``exited(returncode)`` when
    ``process`` (the server) ends first, ``late()`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise exited(process.returncode)
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if ready(answer):
                    return
        except (OSError, ValueError):  # not listening yet (URLError, ConnectionError, timeouts), or a torn answer
            pass
        time.sleep(poll_s)
    raise late()


def main(argv: list[str]) -> None:
    parent, command = int(argv[0]), argv[1:]
    bind_to_parent(parent)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
