"""Benchmark: balance + split + write of a question pool against the I/O floor and a polars rewrite.

    python -m benchmarks.bench_release_floor [--sizes 420000,4200000] [--repeats 3]
                                             [--partitioned-sizes 420000,4200000,42000000]
                                             [--baseline OTHER_CHECKOUT] [--json FILE]

Per pool size (synthetic, tasks/balance/synthetic.py; 1/7 as many images as questions,
180 property groups), each run a fresh interpreter, the four engines alternating, medians of
``--repeats`` runs:

* floor: ``pq.read_table`` of the pool + writing train, test and pool Parquet of the same row
  counts as the project's release (contiguous slices of the pool as read, so no sort and no
  gather), same file layout and writer threads (tasks/release/writer.py); no logic;
* ordered floor: the floor plus only what the release's row order costs: the pool's question_id order
  (``codes.sort_order``) and the pool, train and test written as row views of it through the project's
  writer (``write_folders``: each row gathered once); train and test are the first ``n_train`` and next
  ``n_test`` rows in that order (no balancing, split or statistics). Any implementation that writes the
  release's rows in question_id order from this pool pays at least this;
* polars: benchmarks/polars_release.py, a straightforward polars rewrite of the same semantics
  writing train/test/pool (no stats); its files are asserted byte-identical to the project's;
* project: the build's path (flows/assemble_release.finish_release without Prefect): read ->
  ``plan_release`` -> ``start_stats`` (stats JSON, bias report) -> ``write_release`` with the 5 PNGs
  rendered beside its Parquet writes; the column "without stats" subtracts its measured stats step
  (the PNGs are in the write step).

Then the partitioned path (tasks/balance/partitioned.py: pool kept in Parquet files, key columns
in memory, rows spilled per output file) once per ``--partitioned-sizes``; its release files are
asserted byte-identical to the in-memory release of the same pool where both ran. Pools above
4.2 M questions are written as chunks of 4.2 M (distinct images and ids) and never loaded whole.

With ``--baseline CHECKOUT`` (or an interpreter), the project engine of that checkout runs as a fifth
engine, "project (baseline)", alternating with the others (the A/B of a change to the release step).

Every run is measured by benchmarks/measure.py (fresh interpreter; wall, CPU and the process tree's
peak RSS); the table prints medians with ratios to the floor and to polars, and the load average.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks import measure

TMP = Path(__file__).resolve().parent / "_tmp" / "release_floor"
ENGINES = ("project", "polars", "floor", "ordered floor")
BASELINE = " (baseline)"  # the project engine of --baseline
DIGESTS: dict[int, dict[str, str]] = {}  # questions -> the project release's file digests
CHUNK = 4_200_000  # pools above this size are written as chunk files (never held whole in memory)


def pool_file(questions: int, images: int, groups: int, seed: int = 0) -> Path:
    """Write (once) a synthetic pool of this size as Parquet; return its path."""
    import pyarrow.parquet as pq

    from reasonvqa.tasks.balance.synthetic import synthetic_pool

    path = TMP / f"pool-{questions}-{images}-{groups}-{seed}.parquet"
    if not path.exists():
        TMP.mkdir(parents=True, exist_ok=True)
        pq.write_table(synthetic_pool(questions, images, groups, seed=seed), path, compression="zstd")
    return path


def pool_files(questions: int, seed: int = 0) -> list[Path]:
    """The pool as Parquet: one file up to CHUNK questions, else chunks of CHUNK with distinct images and ids."""
    import pyarrow.parquet as pq

    from reasonvqa.tasks.balance.synthetic import synthetic_pool

    if questions <= CHUNK:
        return [pool_file(questions, max(questions // 7, 1), 180, seed)]
    folder = TMP / f"pool-{questions}-{seed}"
    paths = []
    for i, start in enumerate(range(0, questions, CHUNK)):
        path = folder / f"chunk-{i:03d}.parquet"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            n = min(CHUNK, questions - start)
            chunk = synthetic_pool(n, max(n // 7, 1), 180, seed=seed * 1000 + i, image_offset=start // 7)
            pq.write_table(chunk, path.with_suffix(".tmp"), compression="zstd")
            path.with_suffix(".tmp").rename(path)
        paths.append(path)
    return paths


def run_partitioned(paths: list[Path], out: Path) -> dict:
    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from reasonvqa.tasks.balance.partitioned import plan_partitioned

    steps = Steps()
    done = plan_partitioned(paths, BalanceConfig(), SplitConfig(), 0, out / "_work")
    steps.mark("decide + spill")
    result = stats_and_release(done, out, steps)
    shutil.rmtree(out / "_work", ignore_errors=True)
    return result


class Steps(dict):
    """Seconds per named step, each since the previous mark; ``total`` since creation."""

    def __init__(self) -> None:
        super().__init__()
        self.start = self.last = time.perf_counter()
        self.peaks: dict[str, int] = {}  # step -> the process's peak RSS (MB) when the step ended

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self[name] = round(now - self.last, 2)
        self.last = now
        self.peaks[name] = round(measure.own_peak_mb())

    def total(self) -> float:
        return time.perf_counter() - self.start


def run_floor(pool_path: Path, out: Path, n_train: int, n_test: int) -> dict:
    import pyarrow.parquet as pq

    start = time.perf_counter()
    pool = pq.read_table(pool_path)
    write_floor(pool, out, n_train, n_test)
    return {"s": time.perf_counter() - start, "counts": {"train": n_train, "test": n_test, "pool": pool.num_rows}}


def write_floor(pool, out: Path, n_train: int, n_test: int) -> None:
    """The floor's write: ``pool`` as read, and train and test as its first ``n_train`` and next ``n_test`` rows
    (contiguous slices: no gather), in the release's file layout on its writer threads."""
    from reasonvqa.tasks.release.writer import WRITERS, write_table_files

    jobs = [("pool", pool), ("train", pool.slice(0, n_train)), ("test", pool.slice(n_train, n_test))]
    with ThreadPoolExecutor(max_workers=WRITERS) as threads:
        list(threads.map(lambda job: write_table_files(job[1], out / job[0]), jobs))


def run_ordered_floor(pool_path: Path, out: Path, n_train: int, n_test: int) -> dict:
    """The floor with the release's row order: read, order by question_id, write the pool and the first
    ``n_train`` / next ``n_test`` rows of that order as row views (each row gathered once)."""
    import pyarrow.parquet as pq

    from reasonvqa import schemas
    from reasonvqa.codes import sort_order
    from reasonvqa.row_views import TableRows
    from reasonvqa.tasks.release.writer import write_folders

    start = time.perf_counter()
    pool = pq.read_table(pool_path)
    order = sort_order(pool["question_id"])
    view, rows = TableRows(pool, order), pool.num_rows
    del pool
    jobs = [("train", view.with_rows(order[:n_train])), ("test", view.with_rows(order[n_train:n_train + n_test])),
            ("pool", view)]
    out.mkdir(parents=True, exist_ok=True)
    write_folders(out, [(folder, rows_, schemas.QUESTIONS) for folder, rows_ in jobs])
    return {"s": time.perf_counter() - start, "counts": {"train": n_train, "test": n_test, "pool": rows}}


def run_polars(pool_path: Path, out: Path) -> dict:
    import pyarrow.parquet as pq

    from benchmarks.polars_release import polars_release
    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig

    start = time.perf_counter()
    counts = polars_release(pq.read_table(pool_path), BalanceConfig(), SplitConfig(), 0, out)
    return {"s": time.perf_counter() - start, "counts": counts}


def run_project(pool_path: Path, out: Path) -> dict:
    import pyarrow.parquet as pq

    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from reasonvqa.tasks.balance.pipeline import plan_release

    steps = Steps()
    pool = pq.read_table(pool_path)
    steps.mark("read")
    done = plan_release(pool, BalanceConfig(), SplitConfig(), 0)
    del pool
    steps.mark("decide")
    return stats_and_release(done, out, steps)


def stats_and_release(done, out: Path, steps: Steps) -> dict:
    """The statistics then ``write_release`` of a planned release, as the build flow does (the PNG figures
    rendered beside the Parquet writes: counted in "write"); the worker's result."""
    from reasonvqa.tasks.balance.stats import start_stats
    from reasonvqa.tasks.release.writer import write_release

    with ThreadPoolExecutor(max_workers=1) as figures:
        _, rendered = start_stats(done.pool, done.balance, done.split, out / "stats", figures)
        steps.mark("stats")
        write_release(out, "bench", "1.0.0", {"train": done.split.train, "test": done.split.test}, pool=done.pool,
                      stats_dir=out / "stats", config={}, inputs={}, stats_ready=rendered.result)
    steps.mark("write")
    counts = {"train": done.split.train.num_rows, "test": done.split.test.num_rows, "pool": done.pool.num_rows}
    return {"s": steps.total(), "steps": dict(steps), "peak_mb_after": steps.peaks, "counts": counts}


def measured(engine: str, pool_path: Path | list[Path], out: Path, extra: list[str] = (),
             where: measure.Side | None = None) -> dict:
    """Run one engine in a fresh interpreter (``where``: another checkout's interpreter and code) with
    benchmarks/measure.py; its JSON result plus the wall, CPU seconds and the peak RSS of its process tree."""
    shutil.rmtree(out, ignore_errors=True)
    where = where or measure.side(None, engine)
    paths = pool_path if isinstance(pool_path, list) else [pool_path]
    run = measure.run_once([where.python, "-m", "benchmarks.bench_release_floor", "--child", "--worker",
                            engine.removesuffix(BASELINE), "--pool", *map(str, paths), "--out", str(out), *extra],
                           cwd=where.cwd, label=engine)
    return {**run.result, "wall_s": run.wall_s, "peak_rss_mb": round(run.peak_mb), "cpu_s": run.cpu_s}


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every Parquet file of the train, test and pool folders under ``folder`` and, for a
    project release, of every file of its stats folder (stats JSON, bias report, plots)."""
    files = sorted(p for name in ("train", "test", "pool") for p in folder.rglob(f"{name}/part-*.parquet"))
    files += sorted(p for p in (folder / "stats").rglob("*") if p.is_file()) if (folder / "stats").is_dir() else []
    return measure.sha256_files(folder, files)


def release_folder(engine: str, out: Path) -> Path:
    return out / "bench" / "1.0.0" if engine.startswith("project") else out


def bench_size(questions: int, repeat: int, baseline: measure.Side | None) -> list[dict]:
    path = pool_file(questions, max(questions // 7, 1), 180)
    engines = ENGINES + ((f"project{BASELINE}",) if baseline else ())
    outs = {engine: TMP / f"out-{engine.replace(' ', '-')}" for engine in engines}
    runs: dict[str, list[dict]] = {engine: [] for engine in engines}
    counts = None
    for rep in range(repeat):
        k = rep % len(engines)
        order = engines[k:] + engines[:k] if rep else engines  # first: project (counts for the floors)
        for engine in order:
            extra = ["--train", str(counts["train"]), "--test", str(counts["test"])] if "floor" in engine else []
            result = measured(engine, path, outs[engine], extra, baseline if engine.endswith(BASELINE) else None)
            counts = counts or result["counts"]
            runs[engine].append(result)
            print(f"  {questions:>10,d} {engine:8s} run {rep + 1}: {result['s']:6.2f} s, {result['peak_rss_mb']:5d} MB "
                  f"{json.dumps(result.get('steps', {}))}", flush=True)
            if rep == 0 and engine == "project":
                DIGESTS[questions] = file_digests(release_folder("project", outs["project"]))
                (TMP / f"digests-{questions}.json").write_text(json.dumps(DIGESTS[questions], indent=1))
            if rep == 0 and engine == "polars":
                tables = {k: v for k, v in DIGESTS[questions].items() if not k.startswith("stats/")}  # polars: no stats
                same = tables == file_digests(outs["polars"])
                if not same:
                    raise AssertionError("polars and project release files differ")
                print("  polars train/test/pool files byte-identical to the project's", flush=True)
    for out in outs.values():
        shutil.rmtree(out, ignore_errors=True)
    rows = []
    for engine in engines:
        row = {"questions": questions, "engine": engine, "s": statistics.median(r["s"] for r in runs[engine]),
               "cpu_s": statistics.median(r["cpu_s"] for r in runs[engine]),
               "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs[engine]), "runs": runs[engine]}
        if engine.startswith("project"):
            row["s_without_stats"] = statistics.median(r["s"] - r["steps"]["stats"] for r in runs[engine])
        rows.append(row)
    return rows


def bench_partitioned(questions: int) -> dict:
    """One run of the partitioned path; its files are compared with the in-memory release's when that ran."""
    out = TMP / "out-partitioned"
    result = measured("partitioned", pool_files(questions), out)
    same = None
    saved = TMP / f"digests-{questions}.json"  # the in-memory release's digests from an earlier run on this pool
    expected = DIGESTS.get(questions) or (json.loads(saved.read_text()) if saved.exists() else None)
    if expected is not None:
        same = expected == file_digests(release_folder("project", out))
        if not same:
            raise AssertionError("partitioned and in-memory release files differ")
    shutil.rmtree(out, ignore_errors=True)
    print(f"  {questions:>10,d} partitioned: {result['s']:6.2f} s, {result['peak_rss_mb']:5d} MB "
          f"{json.dumps(result['steps'])} peak MB after each step {json.dumps(result['peak_mb_after'])}"
          + (" (files identical to the in-memory release)" if same else ""), flush=True)
    return {"questions": questions, "engine": "partitioned", "s": result["s"], "peak_rss_mb": result["peak_rss_mb"],
            "identical_to_in_memory": same, "runs": [result]}


def print_table(rows: list[dict]) -> None:
    by = {(r["questions"], r["engine"]): r for r in rows}
    print("\n| questions | engine | wall s (median) | peak RSS MB | time / floor | memory / floor | time / polars |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if (r["questions"], "floor") not in by:
            print(f"| {r['questions']:,d} | {r['engine']} | {r['s']:.1f} | {r['peak_rss_mb']:,.0f} | - | - | - |")
            continue
        floor, base = by[(r["questions"], "floor")], by[(r["questions"], "polars")]
        extra = f" ({r['s_without_stats']:.1f} without stats)" if "s_without_stats" in r else ""
        print(f"| {r['questions']:,d} | {r['engine']} | {r['s']:.1f}{extra} | {r['peak_rss_mb']:,.0f} | "
              f"{r['s'] / floor['s']:.2f}x | {r['peak_rss_mb'] / floor['peak_rss_mb']:.2f}x | {r['s'] / base['s']:.2f}x |")


def main() -> None:
    parser = measure.parser(__doc__)
    parser.add_argument("--sizes", default="420000,4200000")
    parser.add_argument("--partitioned-sizes", default="420000,4200000",
                        help="sizes for the partitioned (on-disk) path, one run each; add 42000000 for ReasonVQA x10")
    parser.add_argument("--worker", choices=(*ENGINES, "partitioned"), help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=Path, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--train", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--test", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker in ("floor", "ordered floor"):
            run = run_floor if args.worker == "floor" else run_ordered_floor
            result = run(args.pool[0], args.out, args.train, args.test)
        elif args.worker == "partitioned":
            result = run_partitioned(args.pool, args.out)
        else:
            result = (run_polars if args.worker == "polars" else run_project)(args.pool[0], args.out)
        measure.child_result(result)
        return
    load_before = measure.load_average()
    print(f"load average before: {load_before}", flush=True)
    baseline = measure.side(args.baseline, "baseline") if args.baseline else None
    rows = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        rows += bench_size(size, args.repeats, baseline)
    for size in (int(s) for s in args.partitioned_sizes.split(",") if s):
        rows.append(bench_partitioned(size))
    load_after = measure.load_average()
    print(f"load average after: {load_after}")
    print_table(rows)
    TMP.mkdir(parents=True, exist_ok=True)
    result = json.dumps({"rows": rows, "load_before": load_before, "load_after": load_after}, indent=2) + "\n"
    (args.json or TMP / "results.json").write_text(result)


if __name__ == "__main__":
    main()
