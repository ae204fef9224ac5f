"""Probe: the cost of putting the 4.2 M synthetic pool into question_id order, by several gathers (nothing written).

    flock /tmp/bench.lock python -m benchmarks.bench_gather_order [--repeat 2]

Each way runs in a fresh interpreter, alternating, on the pool read with one chunk per column (as the writer holds
it) and its question_id order (``codes.sort_order``, not timed):

* writer: ``gathered.gather_rows`` over 1 M-row chunks, one task per column on 2 threads (the release's gather);
* arrow: Arrow's ``take`` per column on 2 threads, the whole order at once;
* arrow-chunks: the same, 1 M rows of the order at a time;
* polars: ``pl.from_arrow``, ``frame[order]`` in 1 M-row pieces, ``to_arrow`` and the cast back to the pool's
  schema (what the writer would need), each part timed.

This is the gather the "ordered floor" of ``bench_release_floor`` pays; it shows whether another library would
make that floor much cheaper.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

WAYS = ("writer", "arrow", "arrow-chunks", "polars")
CHUNK = 1_000_000


def run(way: str) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchmarks.bench_balance_split import pool_file
    from reasonvqa.tasks.balance.codes import sort_order
    from reasonvqa.tasks.release.gathered import gather_rows
    from reasonvqa.tasks.release.writer import one_chunk_per_column

    pool = one_chunk_per_column([pq.read_table(pool_file(4_200_000, 600_000, 180))])
    order = sort_order(pool["question_id"]).astype(np.int64)
    pieces = [order[start:start + CHUNK] for start in range(0, len(order), CHUNK)]
    steps: dict[str, list[float]] = {}

    def mark(name: str, since: tuple[float, float]) -> tuple[float, float]:
        now = (time.perf_counter(), time.process_time())
        steps[name] = [round(now[0] - since[0], 2), round(now[1] - since[1], 2)]
        return now

    start = (time.perf_counter(), time.process_time())
    if way == "writer":
        with ThreadPoolExecutor(2) as threads:
            for rows in pieces:
                gather_rows(pool, rows, [None], threads)
        mark("gather", start)
    elif way.startswith("arrow"):
        with ThreadPoolExecutor(2) as threads:
            for rows in (pieces if way == "arrow-chunks" else [order]):
                indices = pa.array(rows)
                list(threads.map(lambda column: column.take(indices), pool.columns))
        mark("gather", start)
    else:
        import polars as pl

        frame = pl.from_arrow(pool)
        at = mark("from_arrow", start)
        parts = [frame[pl.Series(rows)] for rows in pieces]
        at = mark("gather", at)
        tables = [part.to_arrow(compat_level=pl.CompatLevel.oldest()) for part in parts]
        at = mark("to_arrow", at)
        tables = [table.cast(pool.schema) for table in tables]
        mark("cast", at)
        if not tables[0].equals(pool.take(pa.array(pieces[0]))):
            raise AssertionError("polars' gather differs from Arrow's")
    total = [round(sum(s[0] for s in steps.values()), 2), round(sum(s[1] for s in steps.values()), 2)]
    return {"way": way, "wall_s": total[0], "cpu_s": total[1], "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--worker", choices=WAYS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run(args.worker)))
        return
    import os

    print(f"load average before: {os.getloadavg()}", flush=True)
    for rep in range(args.repeat):
        for way in WAYS if rep % 2 == 0 else WAYS[::-1]:
            out = subprocess.run([sys.executable, "-m", "benchmarks.bench_gather_order", "--worker", way],
                                 capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            print(out.stdout.strip().splitlines()[-1], flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
