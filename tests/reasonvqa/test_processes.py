"""SIGKILL of `reasonvqa build` mid-build: no child server survives, and a resumed build gives the same bytes.

The killed and the resumed build are the console script in a process of their own, each starting its own Prefect
API on the killed one's database; the no-op build after them runs the same command in this process (typer's
runner) against the session's API (``prefect_api``, tests/conftest.py): what it checks is on disk.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from reasonvqa.tasks.release.verify import verify_release

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "reasonvqa")


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return env


def _build(out: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "build", "--sample", "--out", str(out)], env=env, capture_output=True, text=True,
                          timeout=900)


def _build_here(out: Path) -> Path:
    """`reasonvqa build --sample --out OUT` in this process; the release folder it prints last."""
    from typer.testing import CliRunner

    from reasonvqa.flows.cli import app
    from tests.prefect_harness import reopen_prefect_consoles

    reopen_prefect_consoles()
    done = CliRunner().invoke(app, ["build", "--sample", "--out", str(out)])
    assert done.exit_code == 0, done.output
    return Path(done.stdout.strip().splitlines()[-1])


def _servers(process: psutil.Process) -> tuple[list[psutil.Process], bool, bool]:
    children = process.children(recursive=True)
    lines = []
    for child in children:
        try:
            lines.append(" ".join(child.cmdline()))
        except psutil.Error:
            lines.append("")
    mirror = any("oxigraph" in line and "serve-read-only" in line for line in lines)
    prefect = any("prefect" in line and "server" in line for line in lines)
    return children, mirror, prefect


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_sigkill_leaves_no_child_and_the_resumed_build_matches_a_clean_one(tmp_path, sample_release, prefect_api):
    env = _env(Path(tempfile.mkdtemp(prefix="prefect-home-", dir=tmp_path)))
    out = tmp_path / "out"
    cli = subprocess.Popen([CLI, "build", "--sample", "--out", str(out)], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process = psutil.Process(cli.pid)
    deadline = time.monotonic() + 600
    children, mirror, prefect = [], False, False
    while time.monotonic() < deadline and cli.poll() is None and not (mirror and prefect):
        children, mirror, prefect = _servers(process)
        time.sleep(0.2)
    assert mirror and prefect, f"build ended or timed out before both servers ran: {[c.pid for c in children]}"
    children = process.children(recursive=True)
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    _, alive = psutil.wait_procs(children, timeout=60)  # each child sees its parent gone and exits
    survivors = [c.pid for c in alive if _alive(c.pid)]
    for pid in survivors:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert survivors == []

    resumed = _build(out, env)
    assert resumed.returncode == 0, resumed.stderr
    release = Path(resumed.stdout.strip().splitlines()[-1])
    assert verify_release(release) == []
    first = _files(release)

    assert _build_here(out) == release  # the same config into the same --out: a no-op
    assert _files(release) == first

    # the clean build: the session's (tests/conftest.py), the same sample config built in one go elsewhere
    assert release.relative_to(out) == sample_release.relative_to(sample_release.parents[1])
    assert _files(sample_release) == first
