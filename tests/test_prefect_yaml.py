"""prefect.yaml on a real Prefect server: deploy to a process work pool, run from the CLI or by schedule,
refresh knowledge, keep `reasonvqa serve` off the deployments and run what it serves.

The module's server is the one the deployments journey of docs/deployments.md starts (run as written, as
tests/test_readme.py runs the other journeys, with prompts forced on and no input, so a question from
`prefect deploy --all` would fail it): `prefect server start` on 127.0.0.1 with a temporary PREFECT_HOME (its
scheduler on), the `reasonvqa` process pool, the deployments and a `prefect worker start` that runs the flow
runs as subprocesses, as in production. Knowledge comes from the bundled entities served by Oxigraph on
127.0.0.1 behind a proxy that counts SPARQL requests.
"""

from __future__ import annotations

import contextlib
import json
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
from prefect.deployments import run_deployment as run_deployment_here

from reasonvqa.children import free_port, popen_bound, stop
from reasonvqa.flows.config import sample_config
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.mirror import serve_mirror
from reasonvqa.tasks.release.verify import verify_release
from tests.test_readme import EXPECTED_RELEASES, journey_checkout, journey_running

pytestmark = pytest.mark.integration
PROJECT = Path(__file__).resolve().parents[1]  # where prefect.yaml lives


@pytest.fixture(scope="module")
def prefect_env(tmp_path_factory):
    """The deployments journey of docs/deployments.md run as written (tests/test_readme.py): a Prefect server, the
    `reasonvqa` process pool, `prefect deploy --all`, a worker and two deployment runs; yields the environment for
    `prefect` commands against that server while its server and worker still run."""
    folder, env = journey_checkout(tmp_path_factory.mktemp("deployments"))
    port = str(free_port())
    env.update(PREFECT_LOGGING_LEVEL="WARNING",
               PREFECT_CLI_PROMPT="true",  # a question from `prefect deploy --all` (or any command): EOFError
               # a new deployment's runs are scheduled within a second (Prefect: 5 s)
               PREFECT_SERVER_SERVICES_SCHEDULER_RECENT_DEPLOYMENTS_LOOP_SECONDS="1")
    with journey_running("deployments", folder, env, port, timeout_s=480) as output:
        (folder.parent / "journey-output.txt").write_text(output)  # a file: the environment limits a value's size
        env.update(PREFECT_API_URL=f"http://127.0.0.1:{port}/api", PREFECT_CLI_PROMPT="false",
                   JOURNEY_FOLDER=str(folder))
        with api(env) as client:  # how long a deploy takes on this machine: from the pool's creation to the last
            created = [d.created for d in client.read_deployments()]  # deployment (gcl create and deploy)
            env["DEPLOY_SECONDS"] = f"{(max(created) - client.read_work_pool('reasonvqa').created).total_seconds():.1f}"
        yield env


def prefect(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a `prefect` CLI command in the project folder."""
    done = subprocess.run([sys.executable, "-m", "prefect", *args], env=env, cwd=PROJECT, capture_output=True,
                          stdin=subprocess.DEVNULL, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"prefect {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def run_deployment(env: dict, name: str, params: dict, check: bool = True) -> subprocess.CompletedProcess:
    return prefect(env, "deployment", "run", name, "--params", json.dumps(params), "--watch", check=check)


def sample_run(env: dict, params: dict) -> None:
    """A run of build-reasonvqa/sample by the pool's worker, created in this process (the CLI's `deployment run`
    is checked by the journey and the tests of a refused or failed run), which must complete."""
    with api(env):
        run = run_deployment_here("build-reasonvqa/sample", parameters=params, timeout=600, poll_interval=1)
    assert run.state.is_completed(), run.state


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
    log = Path(env["JOURNEY_FOLDER"]) / "prefect-server.log"  # where the journey's server writes
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
    directory) with its first source only (the Visual Genome sample: the runs check scheduling and
    refresh, the journey builds the whole sample) and the knowledge coming from ``endpoint``, refreshed daily."""
    deployment = yaml.safe_load((PROJECT / "prefect.yaml").read_text())["deployments"][0]
    assert deployment["name"] == "sample"
    config = deployment["parameters"]["config"]
    assert config["sources"][0]["kind"] == "vg"
    return {**config, "sources": config["sources"][:1], "knowledge": {"endpoint": endpoint, "refresh": "1d"}}


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


def test_the_deployments_journey_runs_as_written(prefect_env):
    for version in EXPECTED_RELEASES["deployments"]:
        assert verify_release(Path(prefect_env["JOURNEY_FOLDER"]) / "out" / "reasonvqa-sample" / version) == []


def test_deploy_asks_nothing_and_the_readme_lists_every_deployment(prefect_env):
    assert "Would you like" not in (Path(prefect_env["JOURNEY_FOLDER"]).parent / "journey-output.txt").read_text()
    with api(prefect_env) as client:
        flows = {flow.id: flow.name for flow in client.read_flows()}
        deployed = sorted(f"{flows[d.flow_id]}/{d.name}" for d in client.read_deployments() if d.work_pool_name)
    assert len(deployed) == len(yaml.safe_load((PROJECT / "prefect.yaml").read_text())["deployments"])
    documents = " ".join(p.read_text() for p in [PROJECT / "README.md", *sorted((PROJECT / "docs").glob("*.md"))])
    assert [name for name in deployed if f"`{name}`" not in documents] == []


def test_schedule_fires_then_sample_runs_reuse_knowledge_within_the_day_and_refetch_after(prefect_env, tmp_path):
    """Two behaviours on one build of the sample's Visual Genome source (one build fewer than a test each).

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
        sample_run(prefect_env, {**params, "knowledge_as_of": "2026-03-01T23:00:00Z"})
        assert proxy.requests == first
        assert (release / "manifest.json").read_bytes() == manifest

        # past the refresh period: every query sent again; the same facts give the same content,
        # so the release is recognized as identical and not republished
        sample_run(prefect_env, {**params, "knowledge_as_of": "2026-03-02T02:00:00Z"})
        assert proxy.requests == 2 * first
        assert (release / "manifest.json").read_bytes() == manifest
        assert sorted(p.name for p in release.parent.iterdir()) == ["0.1.0"]
        proxy.server.shutdown()


def test_serve_does_not_replace_a_deployment_from_prefect_yaml_unless_asked_and_runs_what_it_serves(prefect_env,
                                                                                                      tmp_path):
    """`reasonvqa serve --name nightly` refuses to replace the pool's build-reasonvqa/nightly; with --replace it
    registers its own, and a `run_deployment` of it runs in the serve process and builds a release that verifies."""
    def nightly() -> DeploymentResponse | None:
        """build-reasonvqa/nightly, or None between --replace deleting it and serve registering its own."""
        from prefect.exceptions import ObjectNotFound

        with api(prefect_env) as client:
            try:
                return client.read_deployment_by_name("build-reasonvqa/nightly")
            except ObjectNotFound:
                return None

    serve = [sys.executable, "-m", "reasonvqa.flows.cli", "serve", "--name", "nightly", "--out", str(tmp_path)]
    vg_only = tmp_path / "vg.yaml"  # the served run is the vehicle: the sample's Visual Genome source alone
    vg_only.write_text(yaml.safe_dump({"sources": [{"kind": "vg", "path": str(PROJECT / "data" / "sample" / "vg")}]}))
    refused = subprocess.run([*serve, "--sample"], env=prefect_env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: build-reasonvqa/nightly (work pool 'reasonvqa') exists, made by "
                                     "`prefect deploy` (prefect.yaml); serving --name nightly would replace it")
    before = nightly()
    assert before.work_pool_name == "reasonvqa"
    assert before.parameters["config"]["release"]["name"] == "reasonvqa-nightly"

    with (tmp_path / "serve.log").open("wb") as log:
        served = popen_bound([*serve, "--config", str(vg_only), "--replace", "--cron", "0 3 * * 1",
                              "--timezone", "Europe/Paris"], env=prefect_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        replaced = wait_until(lambda: (d := nightly()) is not None and d.work_pool_name is None and d.schedules
                              and d, 300, "serve --replace registered build-reasonvqa/nightly")
        with api(prefect_env):  # the module server's URL for run_deployment
            run = run_deployment_here("build-reasonvqa/nightly", timeout=300, poll_interval=1)
    finally:
        stop(served, grace_s=15)
    assert run.state.is_completed(), run.state
    assert verify_release(tmp_path / "reasonvqa-sample" / "0.1.0") == []
    # the pool's deployment was deleted, not updated in place (an upsert would keep its work pool, and the
    # pool's worker would take the served deployment's runs too)
    assert replaced.id != before.id and replaced.parameters["config"]["release"]["name"] == "reasonvqa-sample"
    assert [(s.schedule.cron, s.schedule.timezone) for s in replaced.schedules] == [("0 3 * * 1", "Europe/Paris")]
