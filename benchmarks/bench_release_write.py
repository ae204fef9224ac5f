"""Benchmark: the release write step alone (``write_release`` of ``plan_release``'s views), A/B.

    python -m benchmarks.bench_release_write --base /path/to/base/tree [--size 4200000] [--repeat 3]

Each run is a fresh interpreter that reads the synthetic pool (benchmarks/bench_balance_split.py's
file), runs ``plan_release`` once, then times ``write_release`` (train, test, pool; no stats):
wall and CPU seconds (``time.process_time``, all threads), peak RSS before and after the write.
``--base`` runs the same worker against another checkout of the project (its ``reasonvqa``
packages are mapped over this one's, e.g. a worktree of the base commit); the two trees
alternate and every run's release Parquet files are asserted identical (sha256) to the first's.
``--floor`` adds the I/O floor's write (benchmarks/bench_release_floor.py ``run_floor`` without
its read: the same row counts written as contiguous slices of the pool as read, no gather).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from benchmarks._measure import status_mb
from benchmarks.bench_release_floor import file_digests, release_folder, write_floor

TMP = Path(__file__).resolve().parent / "_tmp" / "release_write"
PACKAGES = {"reasonvqa": "reasonvqa", "reasonvqa.tasks": "tasks", "reasonvqa.flows": "flows",
            "reasonvqa.annotation_exports": "annotation_exports", "reasonvqa.data": "data",
            "reasonvqa.knowledge": "knowledge", "reasonvqa.templates": "templates"}


def use_tree(root: Path) -> None:
    """Import the project's packages from ``root`` (the editable install's finder maps them)."""
    import importlib

    for name in list(sys.modules):
        if name.startswith("__editable__") and name.endswith("_finder"):
            finder = importlib.import_module(name)
            finder.MAPPING.update({pkg: str(root / folder) for pkg, folder in PACKAGES.items()})
            return
    raise RuntimeError("no editable finder to remap")


def worker(pool_path: Path, out: Path, floor: bool = False) -> dict:
    import pyarrow.parquet as pq

    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from reasonvqa.tasks.balance.pipeline import plan_release
    from reasonvqa.tasks.release import writer

    pool = pq.read_table(pool_path)
    done = plan_release(pool, BalanceConfig(), SplitConfig(), 0)
    if floor:  # same row counts and memory state, the pool as read written as slices
        return floor_write(pool, out, (done.split.train.num_rows, done.split.test.num_rows))
    del pool
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    result = timed_write(lambda: writer.write_release(
        out, "bench", "1.0.0", {"train": done.split.train, "test": done.split.test}, pool=done.pool, stats_dir=None,
        config={}, inputs={}))
    digests = file_digests(release_folder("project", out))
    return result | {"peak_mb_before_write": before, "digests": digests, "writer": writer.__file__}


def floor_write(pool, out: Path, counts: tuple[int, int]) -> dict:
    """bench_release_floor's write of ``counts`` (train, test) rows and the pool, timed like the write step."""
    result = timed_write(lambda: write_floor(pool, out, *counts))
    return result | {"peak_mb_before_write": result["rss_mb_at_write"], "digests": None}


def timed_write(write: Callable[[], object]) -> dict:
    """Wall and CPU seconds of ``write()``, the RSS it starts from and the peak RSS during it (MB)."""
    at_start = round(status_mb("VmRSS"))
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM: the peak of the write alone follows
    wall, cpu = time.perf_counter(), time.process_time()
    write()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rss_mb_at_write": at_start,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "write_peak_mb": round(status_mb("VmHWM"))}


def run(tree: Path, pool_path: Path, out: Path, floor: bool = False) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "benchmarks.bench_release_write", "--worker", "--tree", str(tree),
           "--pool", str(pool_path), "--out", str(out), *(["--floor"] if floor else [])]
    result = subprocess.run(cmd, check=True, capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="another checkout to compare with (A/B, alternating)")
    parser.add_argument("--size", type=int, default=4_200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="add the I/O floor's write")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        use_tree(args.tree)
        print(json.dumps(worker(args.pool, args.out, args.floor)))
        return
    from benchmarks.bench_balance_split import pool_file

    pool_path = pool_file(args.size, max(args.size // 7, 1), 180)
    trees = {"this": Path(__file__).resolve().parent.parent}
    if args.base:
        trees = {"base": args.base.resolve(), **trees}
    if args.floor:
        trees["floor"] = trees["this"]
    expected, runs = None, {name: [] for name in trees}
    print(f"load average before: {os.getloadavg()}", flush=True)
    for rep in range(args.repeat):
        for name in (list(trees) if rep % 2 == 0 else list(trees)[::-1]):
            result = run(trees[name], pool_path, TMP / f"out-{name}", floor=name == "floor")
            digests = result.pop("digests") or expected
            expected = expected or digests
            if digests != expected:
                raise AssertionError(f"{name}: release files differ from the first run's")
            runs[name].append(result)
            print(f"  {name:5s} run {rep + 1}: {json.dumps(result)} load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    print(f"all {sum(len(r) for name, r in runs.items() if name != 'floor')} release runs wrote identical files"
          f" ({len(expected)} Parquet files)")
    for name, results in runs.items():
        best = min(results, key=lambda r: r["wall_s"])
        print(f"{name:5s} best of {len(results)}: wall {best['wall_s']:.2f} s, cpu {min(r['cpu_s'] for r in results):.2f} s,"
              f" peak {max(r['peak_mb'] for r in results)} MB (before the write {max(r['peak_mb_before_write'] for r in results)} MB;"
              f" during the write {max(r['write_peak_mb'] for r in results)} MB, from {max(r['rss_mb_at_write'] for r in results)} MB)")


if __name__ == "__main__":
    main()
