"""A/B of ``write_stats`` alone: ``plan_release`` once, then time the statistics step.

Each run is a fresh interpreter (``--worker``); ``--python`` names the interpreters to alternate
(e.g. a base checkout's venv and this one's). Reports the wall seconds of ``write_stats`` and of
importing the stats module before it (as a build does), their CPU seconds (threads and child processes
included), the worker's peak RSS after ``plan_release`` and after ``write_stats``, the children's peak,
and the sha256 of every stats file, asserted equal across interpreters::

    flock /tmp/bench.lock python benchmarks/bench_write_stats.py --pool POOL.parquet \\
        --python /base/.venv/bin/python .venv/bin/python --repeat 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def worker(pool_path: Path, out: Path) -> dict:
    import pyarrow.parquet as pq

    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from reasonvqa.tasks.balance.pipeline import plan_release

    pool = pq.read_table(pool_path)
    done = plan_release(pool, BalanceConfig(), SplitConfig(), 0)
    del pool
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, cpu = time.perf_counter(), time.process_time()
    from reasonvqa.tasks.balance.stats import write_stats  # as a build imports it: counted (polars; matplotlib is
    # imported when the first figure renders, so since perf7 its ~0.25 s is in wall_s, not import_s)

    imported = time.perf_counter()
    write_stats(done.pool, done.balance, done.split, out)
    end, cpu = time.perf_counter(), time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu += (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    return {"wall_s": round(end - imported, 3), "import_s": round(imported - start, 3), "cpu_s": round(cpu, 3),
            "peak_mb_before": round(peak_before / 1024),
            "peak_mb_after": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "children_peak_mb": round(after.ru_maxrss / 1024)}


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def run(python: str, pool: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([os.path.abspath(python), str(Path(__file__).resolve()), "--worker", "--pool", str(pool.resolve()), "--out", str(out)],
                          check=True, stdout=subprocess.PIPE, text=True, cwd=out.parent)
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"digests": digests(out)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_write_stats"))
    parser.add_argument("--python", nargs="+", default=[sys.executable])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.pool.resolve(), args.out)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    print("load before:", open("/proc/loadavg").read().strip())
    results: dict[str, list[dict]] = {p: [] for p in args.python}
    for i in range(args.repeat):
        for k, python in enumerate(args.python):
            r = run(python, args.pool, args.out / f"run-{k}")
            results[python].append(r)
            print(f"{i} {python}: wall {r['wall_s']} s (+ import {r['import_s']} s), cpu with import {r['cpu_s']} s, peak MB before/after "
                  f"{r['peak_mb_before']}/{r['peak_mb_after']}, children {r['children_peak_mb']}", flush=True)
    print("load after:", open("/proc/loadavg").read().strip())
    reference = results[args.python[0]][0]["digests"]
    for python, runs in results.items():
        for r in runs:
            assert r["digests"] == reference, (python, r["digests"], reference)
        best = min(runs, key=lambda r: r["wall_s"])
        print(f"best of {len(runs)} {python}: wall {best['wall_s']} s, wall with import "
              f"{min(r['wall_s'] + r['import_s'] for r in runs):.3f} s, cpu with import {min(r['cpu_s'] for r in runs)} s, "
              f"peak MB {max(r['peak_mb_after'] for r in runs)}, children {max(r['children_peak_mb'] for r in runs)}")
    print(f"identical stats files ({len(reference)}):", ", ".join(reference))


if __name__ == "__main__":
    main()
