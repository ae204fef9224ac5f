"""Benchmark: Prefect's overhead on the sample build, the task count of a ReasonVQA-size plan, image fetch throughput.

    python -m benchmarks.bench_operations [--repeats 3] [--images 400] [--image-kb 60]

    python -m benchmarks.bench_operations --scaled-copies 200 --scaled-shard-size 100 --skip-fetch

1. Prefect overhead: the sample build (embedded mirror, threads) as the real `build-reasonvqa` flow
   against a Prefect API started once beforehand by ``local_prefect_api`` as the CLI starts it (no
   flow-run heartbeats: reasonvqa/prefect_api.py), vs. the same flow body and stage functions with
   Prefect's flow and task runs taken out (every ``Task.submit`` runs the task's ``.fn`` on a thread
   pool; patched here only): the baseline is the stages' own time. Fresh output folders each run,
   alternating, best of N. With --scaled-copies, also on N copies of the VG sample in small shards
   (many tasks, more work per task). The API server's start (what a CLI build without
   PREFECT_API_URL pays once) is reported apart, and so is Prefect's floor on the sample: the same
   rounds of tasks doing nothing, and a flow run with no task.
2. Task count: Prefect tasks a build of 600K images submits with the default shard size
   (one per source unit, per source shard for linking, grounded and templated questions, per fact batch).
3. Image fetch: `fetch_images` of N synthetic JPEGs from a local HTTP server with 1, 8 and 32 workers,
   answering at once and after a simulated round trip (--latency-ms).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import logging
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock


def without_prefect(module, config, out: str, workers: int) -> None:
    """The flow body and every stage function, with no flow or task runs: each ``Task.submit``
    (whichever stage calls it) runs the task's own function on a thread pool like the default runner's.

    The patches live here, in the benchmark: the product has no "no Prefect" mode.
    """
    from prefect.tasks import Task

    with ThreadPoolExecutor(max_workers=workers) as pool:
        def direct_submit(task, *args, **kwargs):
            return pool.submit(task.fn, *args, **kwargs)

        with mock.patch.object(Task, "submit", direct_submit), \
                mock.patch.object(module, "as_completed", concurrent.futures.as_completed), \
                mock.patch.object(module, "get_run_logger", lambda: logging.getLogger("bench")), \
                mock.patch.object(module, "publish_artifacts", lambda release, publisher: None), \
                mock.patch.object(module, "publish_run_report", lambda report: None):
            module.build_release(config, out)


def prefect_overhead(repeats: int, make_config, label: str, floor: bool = False) -> dict:
    """Best of ``repeats`` alternating runs of the real flow and of ``without_prefect`` on ``make_config()``;
    with ``floor``, also ``prefect_floor`` in the build's shape (its task rounds, in stage order)."""
    from prefect.task_runners import ThreadPoolTaskRunner

    from reasonvqa.flows import build_reasonvqa as module
    from reasonvqa.prefect_api import RECORDER_SETTINGS, local_prefect_api

    workers = min(ThreadPoolTaskRunner()._max_workers, 64)  # the default runner's threads (bounded for the pool)
    timings: dict[str, list[float]] = {"prefect": [], "baseline": []}
    started = time.perf_counter()
    with local_prefect_api() as api, tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        server_start = time.perf_counter() - started if api else None
        module.build_reasonvqa(make_config(), str(Path(tmp) / "warmup"))  # imports, flow registration
        for i in range(repeats):
            for name in ("baseline", "prefect"):
                out = str(Path(tmp) / f"{name}-{i}")
                started = time.perf_counter()
                if name == "prefect":
                    module.build_reasonvqa(make_config(), out)
                else:
                    without_prefect(module, make_config(), out, workers)
                timings[name].append(round(time.perf_counter() - started, 3))
        if api:  # the API's recorder writes task runs in batches, at least every FLUSH_INTERVAL seconds
            time.sleep(float(RECORDER_SETTINGS["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL"]) + 0.5)
        tasks = count_task_runs(api) if api else None
        shape = [tasks[name] // (1 + repeats) for name in STAGE_TASKS if name in tasks] if tasks else []
        floors = prefect_floor(repeats, shape) if floor and shape else None
    best = {k: min(v) for k, v in timings.items()}
    return {"input": label, "runs": timings, "best": best, "overhead": best["prefect"] / best["baseline"] - 1,
            "server_start_s": server_start, "task_runs": tasks, "floor": floors}


STAGE_TASKS = ("read-source-unit", "grounded-shard", "link-shard", "facts-shard", "questions-shard")  # flow order


def prefect_floor(repeats: int, rounds: list[int]) -> dict:
    """Prefect's own cost for a build's shape with no work: best of ``repeats`` flow runs that submit
    ``rounds`` of no-op tasks (each round waited for, like the stages) and of flow runs with no task.
    Run against the API of ``prefect_overhead``; a pause before each run lets the server's batched
    writes of the one before settle (a flow-run creation racing them gets a 503 and Prefect's 2 s retry)."""
    timings: dict[str, list[float]] = {"tasks": [], "flow_only": []}
    for _ in range(repeats):
        for name, shape in (("tasks", rounds), ("flow_only", [])):
            time.sleep(0.5)
            started = time.perf_counter()
            noop_rounds(shape)
            timings[name].append(round(time.perf_counter() - started, 3))
    return {"rounds": rounds, "runs": timings, "best": {k: min(v) for k, v in timings.items()}}


def _noop_flow():
    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE

    @task(name="noop", cache_policy=NO_CACHE)
    def noop(i: int) -> dict:
        return {"rows_in": i}

    @flow(name="bench-prefect-floor", log_prints=True)
    def rounds_of_noops(rounds: list[int]) -> int:
        return sum(f.result()["rows_in"] for n in rounds for f in [noop.submit(i) for i in range(n)])

    return rounds_of_noops


def noop_rounds(rounds: list[int]) -> int:
    """One flow run of ``rounds`` no-op task rounds (the flow is made once per process)."""
    global _NOOP_FLOW
    if _NOOP_FLOW is None:
        _NOOP_FLOW = _noop_flow()
    return _NOOP_FLOW(rounds)


_NOOP_FLOW = None


def count_task_runs(api: str) -> dict[str, int]:
    """Task runs the API recorded by task name (every flow run of this benchmark's private API)."""
    from prefect.client.orchestration import get_client

    runs: list = []
    with get_client(sync_client=True) as client:
        while page := client.read_task_runs(limit=200, offset=len(runs)):  # the API's page limit
            runs += page
    return runs_by_task(runs, loaded_tasks())


def runs_by_task(runs: list, tasks: list) -> dict[str, int]:
    """Count ``runs`` (task runs) by the name of the task (of ``tasks``, Prefect ``Task`` objects) whose
    ``task_key`` they carry, whatever the runs are named; a run of another task counts under its key."""
    import collections

    names = {task.task_key: task.name for task in tasks}
    return dict(sorted(collections.Counter(names.get(run.task_key, run.task_key) for run in runs).items()))


def loaded_tasks() -> list:
    """The Prefect tasks defined at the top level of the project's loaded modules (the build's stages)."""
    import sys

    from prefect.tasks import Task

    return [value for name, module in list(sys.modules.items()) if name.startswith(("reasonvqa.", "tasks.", "flows."))
            for value in vars(module).values() if isinstance(value, Task)]


def scaled_sample(folder: Path, copies: int, shard_size: int):
    """A BuildConfig over ``copies`` copies of the bundled Visual Genome sample (ids offset per copy),
    ``shard_size`` images a shard: the same names link to the same mirror items, so the stages do
    ``copies`` times the sample's work in ``copies * 50 / shard_size`` shards."""
    import json

    from reasonvqa.config import BuildConfig
    from reasonvqa.paths import SAMPLE_DIR
    from reasonvqa.sources import parse_config

    def offset(value, add: int):
        if isinstance(value, dict):
            return {k: v + add if k in ID_FIELDS and isinstance(v, int) else
                    [i + add for i in v] if k in ID_LISTS else offset(v, add) for k, v in value.items()}
        if isinstance(value, list):
            return [offset(v, add) for v in value]
        return value

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("image_data.json", "objects.json", "attributes.json", "relationships.json"):
        records = json.loads((SAMPLE_DIR / "vg" / name).read_text())
        scaled = [offset(record, copy * ID_STRIDE) for copy in range(copies) for record in records]
        (folder / name).write_text(json.dumps(scaled))
    return lambda: BuildConfig(sources=[parse_config({"kind": "vg", "path": folder})], shard_size=shard_size)


ID_FIELDS = ("image_id", "object_id", "relationship_id")
ID_LISTS = ("merged_object_ids",)  # images 6-50 of the sample carry them: object ids, offset like object_id
ID_STRIDE = 10_000_000  # above every id of the sample


def task_count(images: int, shard_size: int = 5000, units: int = 2, distinct_items: int = 200_000) -> dict:
    """Tasks one build with the default config submits: one per source unit, then one per source shard
    for linking, grounded questions and templated questions, and one per fact batch (proposals and the
    VLM stage, off by default, would add one per shard each).

    ``distinct_items``: linked Wikidata items (GLDv2 alone has ~200K landmarks; an upper bound).
    """
    shards = -(-images // shard_size)
    fact_batches = -(-distinct_items // shard_size)
    return {"images": images, "shard_size": shard_size, "source_units": units, "source_shards": shards,
            "link": shards, "grounded": shards, "facts": fact_batches, "questions": shards,
            "total": units + 3 * shards + fact_batches}


def _jpeg(kb: int, seed: int) -> bytes:
    import numpy as np
    from PIL import Image

    side = int((kb * 1024 / 1.5) ** 0.5)  # noisy pixels compress poorly: roughly kb per image
    pixels = np.random.default_rng(seed).integers(0, 255, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def fetch_throughput(images: int, kb: int, latency_ms: float = 0.0) -> list[dict]:
    """Images per second fetched with 1, 8 and 32 workers; the server waits ``latency_ms`` before each answer."""
    from reasonvqa import schemas
    from reasonvqa.tasks.release.images import fetch_images
    from reasonvqa.tasks.release.writer import write_release
    from tests.tasks.release.conftest import question

    body = _jpeg(kb, 0)
    from PIL import Image

    width, height = Image.open(io.BytesIO(body)).size

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self):
            time.sleep(latency_ms / 1000)  # a remote server's round trip
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    rows = [question(f"q{i:06d}", f"vg:{i}", "Paris", ["Paris", "Lyon", "Nice", "Lille"]) for i in range(images)]
    table = schemas.from_rows(rows, schemas.QUESTIONS)
    image_rows = [{"image_id": f"vg:{i}", "source": "vg", "source_image_id": str(i), "width": width, "height": height,
                   "url": f"{url}/{i}.jpg", "license": "CC BY 4.0"} for i in range(images)]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        half = images // 2
        release = write_release(Path(tmp) / "out", "bench", "1.0.0",
                                {"train": table.slice(0, half), "test": table.slice(half)}, pool=table,
                                stats_dir=None, config={}, inputs={},
                                tables={"images": schemas.from_rows(image_rows, schemas.IMAGES)})
        for workers in (1, 8, 32):
            report = fetch_images(release, Path(tmp) / f"images-{workers}", workers=workers)
            assert report.fetched == images and not report.failed, report.failed
            results.append({"workers": workers, "images": images, "latency_ms": latency_ms, "seconds": round(report.seconds, 2),
                            "images_per_s": round(images / report.seconds, 1),
                            "mb_per_s": round(report.bytes / 1e6 / report.seconds, 1)})
    server.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--image-kb", type=int, default=60)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--scaled-copies", type=int, default=0,
                        help="Also measure the overhead on this many copies of the VG sample (0: sample only).")
    parser.add_argument("--scaled-shard-size", type=int, default=100)
    parser.add_argument("--skip-fetch", action="store_true", help="Only the overhead and the task count.")
    args = parser.parse_args()
    # a private API database: the default one (~/.prefect/prefect.db) is shared with every other
    # Prefect server of this user, and its size and their writes would be timed as Prefect's cost
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="bench-ops-prefect-home-")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from reasonvqa.config import sample_config

    logging.getLogger("bench").setLevel(logging.WARNING)
    inputs = [("sample", sample_config)]
    with tempfile.TemporaryDirectory(prefix="bench-ops-input-") as tmp:
        if args.scaled_copies:
            inputs.append((f"{args.scaled_copies} x the VG sample, shard_size {args.scaled_shard_size}",
                           scaled_sample(Path(tmp) / "vg", args.scaled_copies, args.scaled_shard_size)))
        for label, make_config in inputs:
            with contextlib.redirect_stdout(io.StringIO()):
                overhead = prefect_overhead(args.repeats, make_config, label, floor=label == "sample")
            print(f"{label}: Prefect flow {overhead['best']['prefect']:.2f} s, without Prefect "
                  f"{overhead['best']['baseline']:.2f} s -> overhead {100 * overhead['overhead']:.1f}% "
                  f"(runs: {overhead['runs']}; API server start {overhead['server_start_s']} s; "
                  f"task runs recorded over {1 + args.repeats} flow runs: {overhead['task_runs']})", flush=True)
            if overhead["floor"]:
                floor = overhead["floor"]
                print(f"{label}: Prefect's floor (no-op tasks in rounds {floor['rounds']}): {floor['best']['tasks']:.3f} s "
                      f"= {100 * floor['best']['tasks'] / overhead['best']['baseline']:.1f}% of the stages' time; "
                      f"a flow run with no task {floor['best']['flow_only']:.3f} s (runs: {floor['runs']})", flush=True)
    print("600K-image plan:", task_count(600_000))
    if args.skip_fetch:
        return
    for row in fetch_throughput(args.images, args.image_kb, 0.0) + fetch_throughput(args.images, args.image_kb, args.latency_ms):
        print("image fetch:", row)


if __name__ == "__main__":
    main()
