"""The Prefect API the CLI starts for a build (reasonvqa/prefect_api.py), run for real on 127.0.0.1."""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import time
    import httpx
    from prefect import flow, task
    from prefect.settings import PREFECT_API_URL, get_current_settings
    from reasonvqa.prefect_api import local_prefect_api

    @task
    def one(i: int) -> int:
        return i

    @flow
    def many(n: int) -> int:
        return sum(f.result() for f in [one.submit(i) for i in range(n)])

    for server in range(2):  # two builds in one process, each with an API of its own (same database)
        with local_prefect_api():
            many(10)
            services = httpx.get(PREFECT_API_URL.value() + "/admin/settings").json()["server"]["services"]
            print("services on", *sorted(k for k, v in services.items() if isinstance(v, dict) and v.get("enabled") is True))
            print("heartbeat inside", get_current_settings().flows.heartbeat_frequency, flush=True)
            if server:  # the first server is stopped at once: its batched task runs are written as it stops
                deadline = time.monotonic() + 30
                while (got := httpx.post(PREFECT_API_URL.value() + "/task_runs/count", json={}).json()) < 20:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                print("recorded", server, got, flush=True)
        print("heartbeat after", get_current_settings().flows.heartbeat_frequency, flush=True)
""")


def test_a_second_api_in_one_process_records_its_task_runs_and_the_process_exits(tmp_path):
    # Prefect's events worker is a per-process service bound to the API it first reached; unless it is
    # drained before that server stops, the next flow's task-run events go to the stopped server (lost,
    # and retried for minutes at exit). The first server is stopped right after its flow: the task runs
    # it held in its recorder's batch are written as it stops (20 in all)
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "home"), "PREFECT_LOGGING_LEVEL": "WARNING",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", None)  # Prefect's default: 180 s
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("recorded")]
    assert lines == [["recorded", "1", "20"]], done.stdout + done.stderr[-3000:]
    # no heartbeats against the command's own server (nothing outlives it to watch them); Prefect's default after
    beats = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("heartbeat")]
    assert beats == [["inside", "None"], ["after", "180"]] * 2, done.stdout
    # of the services the server's settings list, only the task-run recorder runs (db_vacuum names what it would
    # vacuum: events, which need the event persister, off): the rest serve a server that outlives its flows
    services = [line.split()[2:] for line in done.stdout.splitlines() if line.startswith("services on")]
    assert services == [["task_run_recorder"]] * 2, done.stdout


def test_a_configured_api_is_used_as_is_with_prefect_s_heartbeats():
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

    from reasonvqa.prefect_api import local_prefect_api

    # Prefect's default heartbeat (the session's Prefect API, tests/conftest.py, turns it off in this process)
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"},
                            restore_defaults={PREFECT_FLOWS_HEARTBEAT_FREQUENCY}):
        default = get_current_settings().flows.heartbeat_frequency
        with local_prefect_api() as started:
            assert started is None
            assert get_current_settings().flows.heartbeat_frequency == default is not None
