import os
import signal
import subprocess
import sys
import time

import pytest

from reasonvqa.locks import LockHeldError, exclusive_lock

HOLD = """
import sys, time
from reasonvqa.locks import exclusive_lock
with exclusive_lock(sys.argv[1], "work folder"):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder(path):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_holder_is_told_who_holds_it_and_gets_it_when_the_holder_is_killed(tmp_path):
    lock = tmp_path / "w" / ".lock"
    child = _holder(lock)
    try:
        with pytest.raises(LockHeldError, match=rf"work folder {tmp_path / 'w'} is in use by pid {child.pid}"):
            with exclusive_lock(lock, "work folder", wait=False):
                pass
    finally:
        os.kill(child.pid, signal.SIGKILL)  # a crash: the kernel drops the lock, no stale file to clean up
        child.wait()
    with exclusive_lock(lock, "work folder", wait=False):
        assert lock.read_text().strip() == str(os.getpid())


def test_a_waiting_holder_reports_then_proceeds_after_release(tmp_path):
    lock = tmp_path / ".lock"
    child = _holder(lock)
    messages = []

    def on_wait(message):
        messages.append(message)
        os.kill(child.pid, signal.SIGTERM)

    start = time.monotonic()
    with exclusive_lock(lock, "release", on_wait=on_wait):
        pass
    child.wait()
    assert messages == [f"release {tmp_path} is in use by pid {child.pid} (lock {lock}); waiting for it to finish"]
    assert time.monotonic() - start < 30
