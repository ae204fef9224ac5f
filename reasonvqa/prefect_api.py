"""A local Prefect API server for one command, bound to its life.

Without ``PREFECT_API_URL`` a flow call starts Prefect's temporary server as a plain child
process, which SIGKILL of the command leaves running. The CLI starts a server itself
instead (``prefect server start`` on a free 127.0.0.1 port) through ``reasonvqa.children``,
so the kernel kills it with the command, and stops it when the flow returns.

Flow-run heartbeats are off against that server: they feed zombie-flow automations on a server
that outlives the flow, and this one dies with the command, so nothing can watch them; Prefect's
heartbeat thread sleeps in 1 s steps and the flow's exit joins it (0-1 s, 0.5 s on average, per
flow run: most of Prefect's cost on the sample build). A configured API keeps Prefect's default.

The server records task runs in batches (``RECORDER_SETTINGS``) instead of one SQLite transaction
per task-run event: half its CPU per sample build, and its writes stop racing the flow-run creation
(a race that answers 503 and costs Prefect's client a 2 s retry: 8 of 40 back-to-back flow runs).
Its services that serve a server outliving its flows are off (``IDLE_SERVICES``: scheduler, late
runs, workers' foreman, cancellation and cleanup services, pause expirations, the lease repossessor,
automations, the event store behind the UI's event feed; and the UI and analytics); the task-run
recorder and the events stream-out stay (clients may subscribe to events). Measured on the
sample build, the server's CPU per build fell from 0.31-0.37 s to 0.19-0.24 s and its start from
3.2-3.8 s to 2.9-3.1 s (``SERVER_SETTINGS``; a setting in the environment still wins).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from reasonvqa.children import free_port, popen_bound, stop, wait_answering
from reasonvqa.errors import DataError


class PrefectApiError(DataError):
    """The local Prefect API server did not start."""


@contextlib.contextmanager
def local_prefect_api(timeout_s: float = 180.0) -> Iterator[str | None]:
    """Within the block, flows talk to a Prefect API on 127.0.0.1 started for it, unless one is configured.

    The server is stopped after the block and killed by the kernel if this process dies first.
    Yields its API URL (None when an API was already configured and is used as is, heartbeats included).
    """
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    if PREFECT_API_URL.value():
        yield None
        return
    port = free_port()
    log_file = Path(tempfile.mkstemp(prefix="reasonvqa-prefect-server-", suffix=".log")[1])
    with log_file.open("ab") as log:
        process = popen_bound([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                               "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=SERVER_SETTINGS | dict(os.environ))  # a setting in the environment wins
    url = f"http://127.0.0.1:{port}/api"
    before = os.environ.get("PREFECT_API_URL")
    try:
        wait_healthy(url, process, log_file, timeout_s)
        os.environ["PREFECT_API_URL"] = url  # for worker processes (Dask) started inside the block
        with temporary_settings(updates={PREFECT_API_URL: url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield url
    finally:
        try:
            drain_clients()
        finally:
            if before is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = before
            stop(process, grace_s=15)
        log_file.unlink(missing_ok=True)


# task-run events written up to 200 at a time, at least every second (Prefect: one at a time); the
# server writes what it holds when it stops
RECORDER_SETTINGS = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
                     "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1"}
# services with nothing to do on a server that lives for one command's flows: no deployments to schedule,
# no workers, no automations, nobody to browse its UI or event feed; the task-run recorder stays
IDLE_SERVICES = ("CANCELLATION_CLEANUP", "CLEANUP_RECONCILER", "EVENT_PERSISTER", "FOREMAN", "LATE_RUNS",
                 "PAUSE_EXPIRATIONS", "REPOSSESSOR", "SCHEDULER", "TRIGGERS")
SERVER_SETTINGS = RECORDER_SETTINGS | {f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false" for name in IDLE_SERVICES} | {
    "PREFECT_SERVER_UI_ENABLED": "false", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def drain_clients(timeout_s: float = 60.0) -> None:
    """Send the task-run events and log lines this process still queues, while the server answers.

    Prefect sends them from background services; left queued when the server stops, each one is
    retried for seconds at interpreter exit (a build of hundreds of tasks then hangs for minutes).
    """
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (APILogWorker, EventsWorker):
        service.drain_all(timeout=timeout_s, at_exit=False)


def wait_healthy(url: str, process: subprocess.Popen, log_file: Path, timeout_s: float) -> None:
    """Return once the Prefect API at ``url`` answers /health; raise PrefectApiError if the server dies or is late."""

    def exited(code: int) -> PrefectApiError:
        tail = " ".join(log_file.read_text(errors="replace").split()[-60:])
        return PrefectApiError(f"prefect server exited with code {code}: {tail}")

    wait_answering(f"{url}/health", process, timeout_s, exited=exited,
                   late=lambda: PrefectApiError(f"prefect server on {url} not ready after {timeout_s:.0f} s (log: {log_file})"))
