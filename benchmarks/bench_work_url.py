"""The sample build with its work folder on S3 (moto's server on 127.0.0.1) against a local work folder.

Same process, threads runner, alternating local / s3 for ``--runs`` pairs after one warm-up build;
CPU seconds of this process (moto runs in its own) and wall seconds per build, the objects the URL
holds, and the load average. Run: ``flock /tmp/bench.lock python -m benchmarks.bench_work_url``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="prefect-home-"))
    os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
    from prefect.testing.utilities import prefect_test_harness

    from reasonvqa import workstore
    from reasonvqa.config import sample_config
    from reasonvqa.flows.build_reasonvqa import build_reasonvqa
    from tests.moto_s3 import s3_filesystem, s3_server

    root = Path(tempfile.mkdtemp(prefix="bench-work-url-"))
    figures: dict[str, list[tuple[float, float]]] = {"local": [], "s3": []}
    with s3_server("bench"), prefect_test_harness(server_startup_timeout=180):
        build_reasonvqa(sample_config(), str(root / "warm"))
        for run in range(runs):
            for kind in ("local", "s3"):
                shutil.rmtree(workstore.mirror_base(), ignore_errors=True)
                cpu, wall = time.process_time(), time.perf_counter()
                build_reasonvqa(sample_config(), str(root / f"{kind}{run}"), None if kind == "local" else f"s3://bench/w{run}")
                figures[kind].append((time.process_time() - cpu, time.perf_counter() - wall))
        objects = len(s3_filesystem().find("bench/w0"))
    for kind, rows in figures.items():
        print(kind, " ".join(f"cpu={c:.2f}s/wall={w:.2f}s" for c, w in rows))
    ratio = statistics.median(c for c, _ in figures["s3"]) / statistics.median(c for c, _ in figures["local"])
    print(f"median CPU s3/local: {ratio:.2f}; objects at the URL: {objects}")
    print("loadavg", Path("/proc/loadavg").read_text().strip())
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
