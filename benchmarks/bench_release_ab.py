"""A/B of the whole release job (bench_release_floor's workers) between checkouts, in CPU seconds too.

    flock /tmp/bench.lock python -m benchmarks.bench_release_ab --trees /base/tree . [--size 4200000 | --pool FILE]
        [--repeat 3] [--engine project|partitioned] [--floor]

Each run is a fresh interpreter: ``<tree>/.venv/bin/python -m benchmarks.bench_release_floor --worker ENGINE``
in that tree (its own code and its own benchmark script, so each tree runs its own statistics/write
sequence). The trees alternate; ``--floor`` adds the I/O floor's worker (this tree's) once per round.
Per run: wall seconds and steps (the worker's), CPU seconds (user + system of the worker, all threads,
from ``os.wait4``) and peak RSS; every run's train/test/pool Parquet and stats files are asserted identical
(sha256) to the first run's. Prints the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from benchmarks.bench_release_floor import TMP, file_digests, measured, pool_files, release_folder


def run(tree: Path, engine: str, paths: list[Path], out: Path, extra: list[str]) -> dict:
    """One worker of ``tree``: its JSON result with cpu_s and peak_rss_mb (its children's included)."""
    return measured(engine, paths, out, extra, python=str(tree / ".venv" / "bin" / "python"), cwd=tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", type=Path, nargs="+", required=True)
    parser.add_argument("--size", type=int, default=4_200_000)
    parser.add_argument("--pool", type=Path, help="this pool file instead of the synthetic one of --size (e.g. sorted)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", choices=("project", "partitioned"), default="project")
    parser.add_argument("--floor", action="store_true")
    parser.add_argument("--save", type=Path, help="write the first run's file digests here (to compare separate runs)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.trees]
    paths = [args.pool.resolve()] if args.pool else pool_files(args.size)
    if args.floor and len(paths) > 1:  # the floor's worker reads one pool file
        parser.error(f"--floor takes a pool of one file: {args.size} questions are {len(paths)} files")
    out = TMP / "out-ab"
    print("load before:", open("/proc/loadavg").read().strip(), flush=True)
    reference, counts = None, None
    for rep in range(args.repeat):
        for tree in trees[rep % len(trees):] + trees[:rep % len(trees)]:
            result = run(tree, args.engine, paths, out, [])
            digests = file_digests(release_folder("project", out))
            reference = reference or digests
            assert digests == reference, f"{tree}: release files differ from the first run's"
            counts = result["counts"]
            print(f"{rep} {tree}: wall {result['s']:.2f} s, cpu {result['cpu_s']:.2f} s, peak {result['peak_rss_mb']} MB, "
                  f"steps {json.dumps(result['steps'])}, peak MB after each {json.dumps(result['peak_mb_after'])}", flush=True)
        if args.floor:
            result = run(trees[-1], "floor", paths, out, ["--train", str(counts["train"]), "--test", str(counts["test"])])
            print(f"{rep} floor: wall {result['s']:.2f} s, cpu {result['cpu_s']:.2f} s, peak {result['peak_rss_mb']} MB", flush=True)
    shutil.rmtree(out, ignore_errors=True)
    if args.save:
        args.save.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    print("load after:", open("/proc/loadavg").read().strip())
    print(f"identical release and stats files in every run ({len(reference)} files)")


if __name__ == "__main__":
    main()
