"""Benchmark: peak memory of the card's breakdown (``released_questions`` + ``write_breakdown``).

    python -m benchmarks.bench_breakdown_memory [--questions 2000000] [--old FILE]

A synthetic pool is written to Parquet once; each run, in a fresh child process, reads it, makes
train and test the writer's row views (``TableRows``, as ``plan_release`` gives them) and writes
``breakdown.json``, reporting peak RSS (ru_maxrss) above the pool's own read, CPU seconds and the
digest of ``breakdown.json``. ``--old`` names a copy of an earlier tasks/release/breakdown.py
(e.g. ``git show d25f308:tasks/release/breakdown.py``) to run as the baseline in the same run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import hashlib, importlib.util, json, resource, sys, time
from pathlib import Path
import numpy as np, pyarrow.parquet as pq
from reasonvqa.tasks.release.writer import TableRows
pool_file, stats, old = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
if old:
    spec = importlib.util.spec_from_file_location("old_breakdown", old)
    module = importlib.util.module_from_spec(spec); sys.modules["old_breakdown"] = module; spec.loader.exec_module(module)
else:
    from reasonvqa.tasks.release import breakdown as module
pool = pq.read_table(pool_file).combine_chunks()
rows = np.random.default_rng(0).permutation(pool.num_rows)
cut = pool.num_rows * 4 // 5
train, test = TableRows(pool, rows[:cut]), TableRows(pool, rows[cut:])
before = resource.getrusage(resource.RUSAGE_SELF)
stats.mkdir()
module.write_breakdown(module.released_questions(train, test), None, stats)
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"pool_read_mb": round(before.ru_maxrss / 1024), "peak_rss_mb": round(after.ru_maxrss / 1024),
                  "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
                  "breakdown_sha256": hashlib.sha256((stats / "breakdown.json").read_bytes()).hexdigest()[:16]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=2_000_000)
    parser.add_argument("--old", default="", help="an earlier breakdown.py to run as the baseline")
    args = parser.parse_args()
    import pyarrow.parquet as pq

    from tests.tasks.balance.synthetic import synthetic_pool

    with tempfile.TemporaryDirectory(prefix="bench-breakdown-") as tmp:
        pool_file = Path(tmp) / "pool.parquet"
        pq.write_table(synthetic_pool(args.questions, max(args.questions // 7, 1), 180, seed=5), pool_file)
        print(f"{args.questions} questions")
        runs = ([("d25f308 (old)", args.old)] if args.old else []) + [("streamed", "")]
        for k, (label, old) in enumerate(runs):
            out = subprocess.run([sys.executable, "-c", CHILD, str(pool_file), str(Path(tmp) / f"stats-{k}"), old],
                                 capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            print(label, out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
