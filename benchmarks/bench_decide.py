"""Benchmark: the release's decision step (``pipeline.plan_release``) alone, A/B between source trees.

    python -m benchmarks.bench_decide [--questions 4200000] [--trees BASE_TREE,.] [--repeat 3] [--profile]

Each run is a fresh interpreter that imports ``reasonvqa`` from one tree (a checkout of this
repository, e.g. ``git archive <commit>`` unpacked), reads the synthetic pool Parquet
(benchmarks/bench_balance_split.pool_file) and times ``plan_release`` alone: CPU seconds
(``time.process_time``, all threads) and wall seconds. The trees alternate; the table gives the
best of ``--repeat`` runs of each. Every run also digests its decision (row numbers of train, test,
removed and the pool order, the removed table, the balance and split reports, the images table),
and the digests of all runs must agree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.bench_balance_split import pool_file
from benchmarks.bench_release_write import use_tree


def decision_digest(done) -> str:
    """sha256 over everything the decision hands on (row numbers, removed table, reports, images)."""
    import pyarrow as pa

    h = hashlib.sha256()
    for rows in (done.split.train.rows, done.split.test.rows, done.pool.rows, done.balance.removed_rows):
        h.update(rows.astype("int64").tobytes())
    for table in (done.balance.removed, done.split.images):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.combine_chunks())
        h.update(sink.getvalue().to_pybytes())
    h.update(json.dumps([done.balance.report, done.split.report], sort_keys=True).encode())
    return h.hexdigest()


def worker(tree: Path, pool_path: Path, profile: bool) -> dict:
    use_tree(tree)
    import pyarrow.parquet as pq

    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from reasonvqa.tasks.balance.pipeline import plan_release

    assert Path(sys.modules["reasonvqa.tasks.balance.pipeline"].__file__).is_relative_to(tree)
    pool = pq.read_table(pool_path)
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(plan_release, pool, BalanceConfig(), SplitConfig(), 0)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(45)
    cpu, wall = time.process_time(), time.perf_counter()
    done = plan_release(pool, BalanceConfig(), SplitConfig(), 0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "digest": decision_digest(done)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=4_200_000)
    parser.add_argument("--trees", default=".", help="comma-separated source trees, run alternately")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one extra call first (to stderr)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker.resolve(), args.pool, args.profile)))
        return
    pool = pool_file(args.questions, max(args.questions // 7, 1), 180)
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    runs: dict[Path, list[dict]] = {t: [] for t in trees}
    for rep in range(args.repeat):
        for tree in trees if rep % 2 == 0 else trees[::-1]:
            cmd = [sys.executable, "-m", "benchmarks.bench_decide", "--worker", str(tree), "--pool", str(pool)]
            out = subprocess.run(cmd + (["--profile"] if args.profile else []), check=True, stdout=subprocess.PIPE,
                                 text=True).stdout
            result = json.loads(out.strip().splitlines()[-1]) | {"load": os.getloadavg()[0]}
            runs[tree].append(result)
            print(f"{tree}: run {rep + 1}: {result}", flush=True)
    digests = {r["digest"] for rs in runs.values() for r in rs}
    for tree, rs in runs.items():
        print(f"{tree}: best cpu {min(r['cpu_s'] for r in rs):.2f} s, best wall {min(r['wall_s'] for r in rs):.2f} s")
    print("decisions identical" if len(digests) == 1 else f"DECISIONS DIFFER: {digests}")


if __name__ == "__main__":
    main()
