"""`reasonvqa serve` registers build-reasonvqa/<name> and runs what `run_deployment` triggers."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL

from reasonvqa.tasks.release.verify import verify_release

pytestmark = pytest.mark.integration


@pytest.fixture
def served(tmp_path):
    env = dict(os.environ, PREFECT_API_URL=PREFECT_API_URL.value(), PREFECT_LOGGING_LEVEL="WARNING")
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "reasonvqa.flows.cli", "serve", "--name", "ci", "--sample", "--out", str(tmp_path / "out")],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    yield tmp_path / "out"
    process.terminate()
    process.wait(timeout=30)
    log.close()


def _wait_for_deployment(name: str, timeout_s: float = 90) -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            try:
                client.read_deployment_by_name(name)
                return
            except ObjectNotFound:  # not registered yet
                time.sleep(1)
    raise TimeoutError(f"deployment {name} was not registered within {timeout_s} s")


def test_deployment_run_builds_a_release(served):
    _wait_for_deployment("build-reasonvqa/ci")
    run = run_deployment("build-reasonvqa/ci", timeout=300)
    assert run.state.is_completed(), run.state
    release = Path(served) / "reasonvqa-sample" / "0.1.0"
    assert verify_release(release) == []
