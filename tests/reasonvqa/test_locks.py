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


def test_a_waiting_holder_is_told_at_once_and_again_while_it_waits(tmp_path):
    import threading

    lock = tmp_path / ".lock"
    child = _holder(lock)
    messages, said = [], threading.Condition()

    def on_wait(message):
        with said:
            messages.append(message)
            said.notify_all()

    def wait_for_lock():
        with exclusive_lock(lock, "release", on_wait=on_wait, repeat_every=0.05):
            pass

    waiter = threading.Thread(target=wait_for_lock)
    try:
        waiter.start()
        with said:  # a condition, not a sleep: the holder is named first, then again while it holds on
            assert said.wait_for(lambda: len(messages) >= 3, timeout=30)
        assert messages[0] == f"release {tmp_path} is in use by pid {child.pid} (lock {lock}); waiting for it to finish"
        assert messages[1].startswith(f"still waiting (0 s) for pid {child.pid} to release {lock}")
        assert waiter.is_alive()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    waiter.join(timeout=30)
    assert not waiter.is_alive()


def test_the_default_waiting_line_goes_to_stderr_without_debug(tmp_path, capfd):
    from reasonvqa.locks import held_by

    lock = tmp_path / ".lock"
    assert held_by(lock) is None  # absent: not created by asking
    child = _holder(lock)
    assert held_by(lock) == f"pid {child.pid}"
    import threading

    def wait_for_lock():
        with exclusive_lock(lock, "release"):
            pass

    waiter = threading.Thread(target=wait_for_lock)
    waiter.start()
    try:
        deadline = time.monotonic() + 30
        err = ""
        while "waiting for it to finish" not in err and time.monotonic() < deadline:
            waiter.join(timeout=0.05)  # a bounded wait on the thread, reading what it wrote meanwhile
            err += capfd.readouterr().err
        assert f"warning: release {tmp_path} is in use by pid {child.pid}" in err
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    waiter.join(timeout=30)
    assert not waiter.is_alive() and held_by(lock) is None
