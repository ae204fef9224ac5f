"""prefect.yaml on a real Prefect server: deploy to a process work pool, run from the CLI, refresh knowledge.

One `prefect server start` on 127.0.0.1 with a temporary PREFECT_HOME serves the module; a
`prefect worker start` runs the flow runs as subprocesses, as in production. Knowledge comes from
the bundled entities served by Oxigraph on 127.0.0.1 behind a proxy that counts SPARQL requests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from reasonvqa.children import free_port, popen_bound, stop
from reasonvqa.config import sample_config
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
               PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_CLI_PROMPT="false")
    log = home / "server.log"
    with log.open("ab") as handle:
        server = popen_bound([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                              "--port", str(port)], env=env, stdout=handle, stderr=subprocess.STDOUT)
    worker = None
    try:
        wait_healthy(env["PREFECT_API_URL"], server, log, timeout_s=180)
        prefect(env, "work-pool", "create", "reasonvqa", "--type", "process")
        prefect(env, "deploy", "--all")
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
                          text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"prefect {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def run_deployment(env: dict, name: str, params: dict, check: bool = True) -> subprocess.CompletedProcess:
    return prefect(env, "deployment", "run", name, "--params", json.dumps(params), "--watch", check=check)


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


def test_sample_deployment_reuses_knowledge_within_the_day_and_refetches_after(prefect_env, tmp_path):
    with serve_mirror(KnowledgeConfig().mirror_entities, tmp_path / "mirror") as mirror:
        proxy = CountingProxy(mirror)
        params = {"config": sample_with_endpoint(proxy.url), "out": str(tmp_path / "out")}
        release = tmp_path / "out" / "reasonvqa-sample" / "0.1.0"

        run_deployment(prefect_env, "build-reasonvqa/sample", {**params, "knowledge_as_of": "2026-03-01T02:00:00Z"})
        first = proxy.requests
        manifest = (release / "manifest.json").read_bytes()
        assert first > 0 and verify_release(release) == []
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
    assert "no-such-vg" in done.stdout + done.stderr
