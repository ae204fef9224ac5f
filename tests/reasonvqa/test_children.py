import os
import signal
import subprocess
import sys
import time

import psutil

PARENT = """
import subprocess, sys, time
from reasonvqa.children import popen_bound
child = popen_bound(["sleep", "60"])
print(child.pid, flush=True)
time.sleep(60)
"""


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_bound_child_dies_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 30
    while psutil.Process(child).cmdline() != ["sleep", "60"] and time.monotonic() < deadline:
        time.sleep(0.05)  # the launcher has not exec'd the command yet
    assert psutil.Process(child).cmdline() == ["sleep", "60"]  # the launcher became the command itself
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    try:
        assert _gone_within(child, 5)
    finally:
        if not _gone_within(child, 0):
            os.kill(child, signal.SIGKILL)


def test_wait_answering_returns_when_ready_and_raises_when_the_server_ends_or_is_late(tmp_path):
    import pytest

    from reasonvqa.children import free_port, wait_answering

    port = free_port()
    (tmp_path / "ok").write_text("{}")
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_answering(f"http://127.0.0.1:{port}/ok", server, 30, exited=RuntimeError, late=lambda: TimeoutError("late"))
        with pytest.raises(TimeoutError, match="late"):  # answers, but never as asked
            wait_answering(f"http://127.0.0.1:{port}/ok", server, 0.5, ready=lambda answer: False,
                           exited=RuntimeError, late=lambda: TimeoutError("late"))
    finally:
        server.kill()
        server.wait()
    with pytest.raises(RuntimeError, match="exited with -9"):
        wait_answering(f"http://127.0.0.1:{port}/ok", server, 30,
                       exited=lambda code: RuntimeError(f"exited with {code}"), late=lambda: TimeoutError("late"))
