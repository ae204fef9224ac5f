"""Benchmark: Prefect's overhead on the sample build, the task count of a ReasonVQA-size plan, image fetch throughput.

    python -m benchmarks.bench_operations [--repeats 3] [--images 400] [--image-kb 60]

1. Prefect overhead: the sample build (embedded mirror, threads) as the real `build-reasonvqa` flow
   against a Prefect API started once beforehand, vs. the same flow body and stage functions with
   Prefect's flow and task runs taken out (tasks called through `.fn` on a thread pool): the
   baseline is the stages' own time. Fresh output folders each run, alternating, best of N.
2. Task count: Prefect tasks a build of 600K images submits with the default shard size
   (one per source unit, per source shard for linking and questions, per fact batch).
3. Image fetch: `fetch_images` of N synthetic JPEGs from a local HTTP server with 1, 8 and 32 workers,
   answering at once and after a simulated round trip (--latency-ms).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock


def prefect_overhead(repeats: int) -> dict:
    from reasonvqa.config import sample_config
    from reasonvqa.flows import build_reasonvqa as module
    from reasonvqa.prefect_api import local_prefect_api

    def without_prefect(out: str) -> None:
        def plain_run_tasks(task_fn, calls, one_at_a_time):
            with ThreadPoolExecutor(max_workers=1 if one_at_a_time else 8) as pool:
                return list(pool.map(lambda args: task_fn.fn(*args), calls))

        with mock.patch.object(module, "run_tasks", plain_run_tasks), \
                mock.patch.object(module, "get_run_logger", lambda: logging.getLogger("bench")), \
                mock.patch.object(module, "publish_artifacts", lambda release: None), \
                mock.patch.object(module, "publish_run_report", lambda report: None):
            module.build_reasonvqa.fn(sample_config(), out)

    def with_prefect(out: str) -> None:
        module.build_reasonvqa(sample_config(), out)

    timings: dict[str, list[float]] = {"prefect": [], "baseline": []}
    with local_prefect_api(), tempfile.TemporaryDirectory(prefix="bench-ops-") as tmp:
        with_prefect(str(Path(tmp) / "warmup"))  # imports, first flow run registration
        for i in range(repeats):
            for name, run in (("baseline", without_prefect), ("prefect", with_prefect)):
                started = time.perf_counter()
                run(str(Path(tmp) / f"{name}-{i}"))
                timings[name].append(time.perf_counter() - started)
    best = {k: min(v) for k, v in timings.items()}
    return {"runs": timings, "best": best, "overhead": best["prefect"] / best["baseline"] - 1}


def task_count(images: int, shard_size: int = 5000, units: int = 2, distinct_items: int = 200_000) -> dict:
    """Tasks one build submits: a unit per source file group, then per shard (link, questions), per fact batch.

    ``distinct_items``: linked Wikidata items (GLDv2 alone has ~200K landmarks; an upper bound).
    """
    shards = -(-images // shard_size)
    fact_batches = -(-distinct_items // shard_size)
    return {"images": images, "shard_size": shard_size, "source_units": units, "source_shards": shards,
            "link": shards, "facts": fact_batches, "questions": shards,
            "total": units + shards + fact_batches + shards}


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
    import pyarrow as pa

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
    args = parser.parse_args()
    logging.getLogger("bench").setLevel(logging.WARNING)
    with contextlib.redirect_stdout(io.StringIO()):
        overhead = prefect_overhead(args.repeats)
    print(f"sample build: Prefect flow {overhead['best']['prefect']:.2f} s, without Prefect "
          f"{overhead['best']['baseline']:.2f} s -> overhead {100 * overhead['overhead']:.1f}% "
          f"(runs: {overhead['runs']})")
    print("600K-image plan:", task_count(600_000))
    for row in fetch_throughput(args.images, args.image_kb, 0.0) + fetch_throughput(args.images, args.image_kb, args.latency_ms):
        print("image fetch:", row)


if __name__ == "__main__":
    main()
