"""prefect.yaml on a real Prefect server: deploy to a process work pool, run from the CLI or by schedule,
refresh knowledge, keep `reasonvqa serve` off the deployments.

One `prefect server start` on 127.0.0.1 with a temporary PREFECT_HOME serves the module (its scheduler
on); `prefect deploy --all` runs with prompts forced on and no input, so a question would fail it; a
`prefect worker start` runs the flow runs as subprocesses, as in production. Knowledge comes from
the bundled entities served by Oxigraph on 127.0.0.1 behind a proxy that counts SPARQL requests.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

import pytest
import yaml
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
from prefect.client.schemas.objects import FlowRun
from prefect.client.schemas.responses import DeploymentResponse

from reasonvqa.children import free_port, popen_bound, stop
from reasonvqa.flows.config import sample_config
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.mirror import serve_mirror
from reasonvqa.prefect_api import wait_healthy
from reasonvqa.tasks.release.verify import verify_release

pytestmark = pytest.mark.integration
PROJECT = Path(__file__).resolve().parents[1]  # where prefect.yaml lives


@pytest.fixture(scope="module")
def prefect_env(tmp_path_factory):
    """A Prefect server and a process worker on 127.0.0.1; yields the environment for `prefect` commands."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    env = dict(os.environ, PREFECT_HOME=str(home), PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING",
               PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_CLI_PROMPT="false", COLUMNS="500",  # --watch lines unwrapped
               # a new deployment's runs are scheduled within a second (Prefect: 5 s)
               PREFECT_SERVER_SERVICES_SCHEDULER_RECENT_DEPLOYMENTS_LOOP_SECONDS="1")
    log = home / "server.log"
    with log.open("ab") as handle:
        server = popen_bound([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                              "--port", str(port)], env=env, stdout=handle, stderr=subprocess.STDOUT)
    worker = None
    try:
        wait_healthy(env["PREFECT_API_URL"], server, log, timeout_s=180)
        prefect(env, "work-pool", "create", "reasonvqa", "--type", "process")
        started = time.monotonic()
        deployed = prefect({**env, "PREFECT_CLI_PROMPT": "true"}, "deploy", "--all")  # any question: EOFError
        env["DEPLOY_SECONDS"] = f"{time.monotonic() - started:.1f}"  # how long a deploy takes on this machine
        (home / "deploy.log").write_text(deployed.stdout + deployed.stderr)
        with (home / "worker.log").open("ab") as handle:
            worker = popen_bound([sys.executable, "-m", "prefect", "worker", "start", "--pool", "reasonvqa"],
                                 env=env, cwd=PROJECT, stdout=handle, stderr=subprocess.STDOUT)
        yield env
    finally:
        if worker is not None:
            stop(worker, grace_s=10)
        stop(server, grace_s=15)


def prefect(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a `prefect` CLI command in the project folder."""
    done = subprocess.run([sys.executable, "-m", "prefect", *args], env=env, cwd=PROJECT, capture_output=True,
                          stdin=subprocess.DEVNULL, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"prefect {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def run_deployment(env: dict, name: str, params: dict, check: bool = True) -> subprocess.CompletedProcess:
    return prefect(env, "deployment", "run", name, "--params", json.dumps(params), "--watch", check=check)


@contextlib.contextmanager
def api(env: dict) -> Iterator[SyncPrefectClient]:
    """A client of the module's Prefect server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: env["PREFECT_API_URL"]}), get_client(sync_client=True) as client:
        yield client


def flow_run_of(env: dict, watched: subprocess.CompletedProcess) -> FlowRun:
    """The flow run a `prefect deployment run` created (its output names the run's UUID)."""
    run_id = re.search(r"UUID: ([0-9a-f-]{36})", watched.stdout).group(1)
    with api(env) as client:
        return client.read_flow_run(run_id)


def server_errors(env: dict) -> list[str]:
    """The ERROR lines of the module server's log."""
    log = Path(env["PREFECT_HOME"]) / "server.log"
    return [line for line in log.read_text(errors="replace").splitlines() if "| ERROR" in line]


def wait_until(check: Callable[[], object], timeout_s: float, what: str, poll_s: float = 0.5):
    """``check()``'s first true value, polled every ``poll_s``; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(poll_s)
    return value


class CountingProxy:
    """Forwards SPARQL requests to ``upstream`` and counts them."""

    def __init__(self, upstream: str) -> None:
        proxy = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self._forward(None)

            def do_POST(self):
                self._forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def _forward(self, body):
                proxy.requests += 1
                query = self.path.partition("?")[2]
                request = urllib.request.Request(f"{upstream}?{query}" if query else upstream, data=body,
                                                 headers={k: v for k, v in self.headers.items()
                                                          if k.lower() in ("accept", "content-type")})
                with urllib.request.urlopen(request, timeout=60) as answer:
                    payload = answer.read()
                    self.send_response(answer.status)
                    self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/query"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def sample_with_endpoint(endpoint: str) -> dict:
    """The `sample` deployment's own config (relative paths, resolved in the deployment's working
    directory) with the knowledge coming from ``endpoint``, refreshed daily."""
    deployment = yaml.safe_load((PROJECT / "prefect.yaml").read_text())["deployments"][0]
    assert deployment["name"] == "sample"
    config = deployment["parameters"]["config"]
    return {**config, "knowledge": {"endpoint": endpoint, "refresh": "1d"}}


def test_bad_parameters_are_refused_by_the_schema(prefect_env):
    unknown = run_deployment(prefect_env, "build-reasonvqa/sample", {"bogus": 1}, check=False)
    assert unknown.returncode != 0
    assert "specified but not found on the deployment: 'bogus'" in " ".join(unknown.stdout.split())
    wrong = run_deployment(prefect_env, "build-reasonvqa/sample", {"overwrite": "sometimes"}, check=False)
    assert wrong.returncode != 0
    assert "Validation failed for field 'overwrite'" in " ".join(wrong.stdout.split())


def test_missing_input_path_fails_the_run_naming_it(prefect_env, tmp_path):
    config = sample_config().model_dump(mode="json")
    config["sources"][0]["path"] = str(tmp_path / "no-such-vg")
    done = run_deployment(prefect_env, "build-reasonvqa/sample", {"config": config, "out": str(tmp_path)}, check=False)
    assert done.returncode != 0
    state = flow_run_of(prefect_env, done).state
    assert state.is_failed() and state.message.startswith("FileNotFoundError: ")
    assert str(tmp_path / "no-such-vg") in state.message and "\n" not in state.message
    assert state.message in done.stdout  # --watch prints the reason, not only "Failed"


def test_deploy_asks_nothing_and_the_readme_lists_every_deployment(prefect_env):
    assert "Would you like" not in (Path(prefect_env["PREFECT_HOME"]) / "deploy.log").read_text()
    with api(prefect_env) as client:
        flows = {flow.id: flow.name for flow in client.read_flows()}
        deployed = sorted(f"{flows[d.flow_id]}/{d.name}" for d in client.read_deployments() if d.work_pool_name)
    assert len(deployed) == len(yaml.safe_load((PROJECT / "prefect.yaml").read_text())["deployments"])
    documents = " ".join(p.read_text() for p in [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))])
    assert [name for name in deployed if f"`{name}`" not in documents] == []


def test_schedule_fires_then_sample_runs_reuse_knowledge_within_the_day_and_refetch_after(prefect_env, tmp_path):
    """Two behaviours on one sample build (one build fewer than a test each).

    The schedule: the `sample` deployment of prefect.yaml, deployed under another name with an interval schedule
    whose first run is due once `prefect deploy` has had time to finish: the scheduler creates it, the worker runs
    it and the release verifies. With SQLAlchemy 2.1.9 under Prefect 3.8.8 this fails within seconds on the
    scheduler's ERROR lines (`docket.dependencies ... schedule_recent_deployments`), as the pin in pyproject.toml
    expects.

    The knowledge: that scheduled run builds the sample with its knowledge from a live endpoint (the bundled
    entities behind a counting proxy) as of 2026-03-01 02:00; `build-reasonvqa/sample` runs with the same config
    and output later that day reuse every fact, and past the refresh period fetch them all again, and the same
    facts leave the release as it was."""
    spec = yaml.safe_load((PROJECT / "prefect.yaml").read_text())
    sample = next(d for d in spec["deployments"] if d["name"] == "sample")
    release = tmp_path / "out" / "reasonvqa-sample" / "0.1.0"
    with serve_mirror(KnowledgeConfig().mirror_entities, tmp_path / "mirror") as mirror:
        proxy = CountingProxy(mirror)
        params = {"config": sample_with_endpoint(proxy.url), "out": str(tmp_path / "out")}
        due = datetime.now(timezone.utc) + timedelta(seconds=float(prefect_env["DEPLOY_SECONDS"]) + 5)
        spec["deployments"] = [{**sample, "name": "scheduled",  # missed by a slow deploy: the next one, 2 minutes on
                                "schedules": [{"interval": 120, "anchor_date": due.isoformat(), "timezone": "UTC"}],
                                "parameters": {**sample["parameters"], **params,
                                               "knowledge_as_of": "2026-03-01T02:00:00Z"}}]
        (tmp_path / "prefect.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        prefect(prefect_env, "deploy", "--prefect-file", str(tmp_path / "prefect.yaml"), "--name", "scheduled")

        def finished(client: SyncPrefectClient) -> FlowRun | None:
            errors = [line for line in server_errors(prefect_env) if "schedul" in line.lower()]
            assert errors == [], "the server's scheduler failed:\n" + "\n".join(errors)
            runs = client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])))
            return next((run for run in runs if run.state is not None and run.state.is_final()), None)

        with api(prefect_env) as client:
            deployment = client.read_deployment_by_name("build-reasonvqa/scheduled")
            try:
                run = wait_until(lambda: finished(client), 360, "a scheduled run of build-reasonvqa/scheduled finished")
            finally:
                client.delete_deployment(deployment.id)  # its later runs go with it
        assert run.auto_scheduled and run.expected_start_time >= due - timedelta(seconds=1)
        assert run.state.is_completed(), run.state
        assert run.state.message == f"release written to {release}"
        assert verify_release(release) == []
        first = proxy.requests
        manifest = (release / "manifest.json").read_bytes()
        assert first > 0
        assert json.loads(manifest)["inputs"]["knowledge_date"] == "2026-03-01"

        # later the same day: every fact reused, nothing new published
        run_deployment(prefect_env, "build-reasonvqa/sample", {**params, "knowledge_as_of": "2026-03-01T23:00:00Z"})
        assert proxy.requests == first
        assert (release / "manifest.json").read_bytes() == manifest

        # past the refresh period: every query sent again; the same facts give the same content,
        # so the release is recognized as identical and not republished
        run_deployment(prefect_env, "build-reasonvqa/sample", {**params, "knowledge_as_of": "2026-03-02T02:00:00Z"})
        assert proxy.requests == 2 * first
        assert (release / "manifest.json").read_bytes() == manifest
        assert sorted(p.name for p in release.parent.iterdir()) == ["0.1.0"]
        proxy.server.shutdown()


def test_serve_does_not_replace_a_deployment_from_prefect_yaml_unless_asked(prefect_env, tmp_path):
    def nightly() -> DeploymentResponse | None:
        """build-reasonvqa/nightly, or None between --replace deleting it and serve registering its own."""
        from prefect.exceptions import ObjectNotFound

        with api(prefect_env) as client:
            try:
                return client.read_deployment_by_name("build-reasonvqa/nightly")
            except ObjectNotFound:
                return None

    serve = [sys.executable, "-m", "reasonvqa.flows.cli", "serve", "--name", "nightly", "--sample", "--out", str(tmp_path)]
    refused = subprocess.run(serve, env=prefect_env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                             timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: build-reasonvqa/nightly (work pool 'reasonvqa') exists, made by "
                                     "`prefect deploy` (prefect.yaml); serving --name nightly would replace it")
    before = nightly()
    assert before.work_pool_name == "reasonvqa"
    assert before.parameters["config"]["release"]["name"] == "reasonvqa-nightly"

    with (tmp_path / "serve.log").open("wb") as log:
        served = popen_bound([*serve, "--replace", "--cron", "0 3 * * 1", "--timezone", "Europe/Paris"],
                             env=prefect_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        replaced = wait_until(lambda: (d := nightly()) is not None and d.work_pool_name is None and d.schedules
                              and d, 300, "serve --replace registered build-reasonvqa/nightly")
    finally:
        stop(served, grace_s=15)
    # the pool's deployment was deleted, not updated in place (an upsert would keep its work pool, and the
    # pool's worker would take the served deployment's runs too)
    assert replaced.id != before.id and replaced.parameters["config"]["release"]["name"] == "reasonvqa-sample"
    assert [(s.schedule.cron, s.schedule.timezone) for s in replaced.schedules] == [("0 3 * * 1", "Europe/Paris")]
