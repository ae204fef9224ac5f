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
