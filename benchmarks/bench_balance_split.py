"""Benchmark: question pool Parquet -> balanced, split, written release, vectorized vs pure Python.

    python -m benchmarks.bench_balance_split [--questions 4200000 --images 600000 --groups 180]
                                             [--reference-questions 420000] [--check-questions 20000]
    python -m benchmarks.bench_balance_split --resplit-only [--pythons OLD/.venv/bin/python .venv/bin/python]
                                             [--repeat 3]

1. Equality check: on a small synthetic pool the vectorized engine (tasks/balance/balance.py,
   split.py) and the pure-Python reference (tests/tasks/balance/reference.py) must give identical
   kept/removed/train/test tables and reports (asserted).
2. Each measured run is a fresh interpreter (so peak RSS, VmHWM, is its own) doing the whole
   path: read the pool Parquet -> balance -> split -> stats + plots -> write_release.
   The vectorized run decides on integer codes and hands the writer row views of the pool
   (tasks/balance/pipeline.plan_release, as the build runs it); the reference run balances and
   splits row by row.
3. Runs: vectorized at full size; vectorized and reference at the reference size (the speed
   ratio); reference at full size only with --reference-questions equal to --questions; then
   `resplit` of the full-size release to two of its six domains (fresh interpreter).
``--resplit-only`` writes the full-size release once (this checkout) and times only its re-split, ``--repeat``
times under each of ``--pythons`` (alternating; each child imports whatever ``reasonvqa`` its interpreter has),
asserting every re-split's Parquet and stats files are the same bytes.
Pools are synthetic (tests/tasks/balance/synthetic.py: Zipf-like groups and answers, hashed ids) and
cached under benchmarks/_tmp/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._measure import peak_rss_mb

TMP = Path(__file__).resolve().parent / "_tmp" / "balance_split"


def pool_file(questions: int, images: int, groups: int, seed: int = 0) -> Path:
    """Write (once) a synthetic pool of this size as Parquet; return its path."""
    import pyarrow.parquet as pq

    from tests.tasks.balance.synthetic import synthetic_pool

    path = TMP / f"pool-{questions}-{images}-{groups}-{seed}.parquet"
    if not path.exists():
        TMP.mkdir(parents=True, exist_ok=True)
        pq.write_table(synthetic_pool(questions, images, groups, seed=seed), path, compression="zstd")
    return path


def run_pipeline(engine: str, pool_path: Path, out: Path) -> dict:
    """Pool Parquet -> release folder with one engine; step timings and peak RSS after each step."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from reasonvqa.tasks.balance.stats import write_stats
    from reasonvqa.tasks.release.writer import write_release

    steps: dict[str, dict] = {}
    start = last = time.perf_counter()

    def step(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        steps[name] = {"s": round(now - last, 2), "peak_rss_mb": round(peak_rss_mb())}
        last = now

    pool = pq.read_table(pool_path)
    step("read")
    if engine == "vectorized":
        from reasonvqa.tasks.balance.pipeline import plan_release

        done = plan_release(pool, BalanceConfig(), SplitConfig(), 0)  # row views of the pool, as the build runs it
        pool, balanced, split = done.pool, done.balance, done.split
        del done
        step("balance + split")
    else:
        from tests.tasks.balance.reference import reference_balance, reference_split

        balanced = reference_balance(pool, BalanceConfig(), 0)
        step("balance")
        split = reference_split(balanced.kept, SplitConfig(), 0)
        step("split")
    if out.exists():
        shutil.rmtree(out)
    write_stats(pool, balanced, split, out / "stats")
    step("stats + plots")
    report = {k: balanced.report[k] for k in ("questions_in", "questions_kept", "rounds_run", "converged", "balanced_away_share")}
    report.update({k: split.report[k] for k in ("train_share_images", "train_share_questions", "categories_final")})
    del balanced
    release = write_release(out / "release", "bench", f"0.0.0-{engine}", {"train": split.train, "test": split.test}, pool=pool,
                            stats_dir=out / "stats", config={}, inputs={})
    step("write release")
    return {
        "engine": engine,
        "pool": pool_path.name,
        "questions": pool.num_rows,
        "pool_arrow_mb": round(getattr(pool, "table", pool).nbytes / 2**20),
        "total_s": round(time.perf_counter() - start, 2),
        "peak_rss_mb": round(peak_rss_mb()),
        "steps": steps,
        "report": report,
        "release_files": sum(1 for p in release.rglob("*") if p.is_file()),
        "arrow_bytes_now": pa.total_allocated_bytes(),
    }


def run_resplit(release: Path, out: Path) -> dict:
    """Time ``flows.resplit.resplit`` of a written release to two of its six domains."""
    from benchmarks._measure import sha256_files
    from reasonvqa.flows.resplit import resplit
    from tests.tasks.balance.synthetic import DOMAINS

    start, cpu = time.perf_counter(), time.process_time()
    path = resplit(release, out, domains=list(DOMAINS[:2]))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    manifest = json.loads((path / "manifest.json").read_text())
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".parquet", ".json", ".png"))
    digest = sha256_files(path, files)
    return {"engine": "resplit", "questions": manifest["counts"]["pool"], "total_s": round(seconds, 2),
            "cpu_s": round(cpu, 2), "peak_rss_mb": round(peak_rss_mb()),
            "steps": {}, "report": manifest["counts"], "files_sha256": digest}


def measured(engine: str, pool_path: Path, keep: bool = False, python: str = sys.executable) -> dict:
    """Run one engine in a fresh interpreter (``python``) and return its JSON result."""
    out = TMP / f"out-{engine}-{pool_path.stem}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [python, "-m", "benchmarks.bench_balance_split", "--worker", engine, "--pool", str(pool_path), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{engine} worker ({python}) failed:\n{done.stderr[-3000:]}")
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def resplit_only(full: Path, pythons: list[str], repeat: int) -> None:
    """The full-size release written once, then its re-split timed under each interpreter, alternating."""
    measured("vectorized", full, keep=True)
    release = TMP / f"out-vectorized-{full.stem}"
    digests = set()
    try:
        for rep in range(repeat):
            for python in pythons if rep % 2 == 0 else pythons[::-1]:
                result = measured("resplit", release / "release" / "bench" / "0.0.0-vectorized", python=python)
                digests.add(json.dumps(result.pop("files_sha256"), sort_keys=True))
                print(f"{python}: resplit of {result['questions']:,d} pool questions {result['total_s']} s, "
                      f"{result['cpu_s']} CPU s, peak RSS {result['peak_rss_mb']} MB, counts {result['report']}", flush=True)
    finally:
        shutil.rmtree(release, ignore_errors=True)
    if len(digests) != 1:
        raise SystemExit("the re-splits' files differ between interpreters")
    print("every re-split's Parquet, stats and figure files identical")


def check_equal(questions: int) -> dict:
    """Vectorized and reference give the same tables and reports on a small pool (asserted)."""
    from reasonvqa.tasks.balance.balance import balance_questions
    from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
    from tests.tasks.balance.reference import reference_balance, reference_split
    from reasonvqa.tasks.balance.split import split_images
    from tests.tasks.balance.synthetic import synthetic_pool

    pool = synthetic_pool(questions, max(questions // 7, 1), 30, seed=1)
    fast_b, slow_b = balance_questions(pool, BalanceConfig(), 0), reference_balance(pool, BalanceConfig(), 0)
    assert fast_b.kept.equals(slow_b.kept) and fast_b.removed.equals(slow_b.removed) and fast_b.report == slow_b.report
    fast_s, slow_s = split_images(fast_b.kept, SplitConfig(), 0), reference_split(slow_b.kept, SplitConfig(), 0)
    assert fast_s.train.equals(slow_s.train) and fast_s.test.equals(slow_s.test) and fast_s.report == slow_s.report
    return {"questions": questions, "removed": fast_b.removed.num_rows, "train": fast_s.train.num_rows, "identical": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=4_200_000)
    parser.add_argument("--images", type=int, default=600_000)
    parser.add_argument("--groups", type=int, default=180)
    parser.add_argument("--reference-questions", type=int, default=420_000)
    parser.add_argument("--check-questions", type=int, default=20_000)
    parser.add_argument("--resplit-only", action="store_true", help="time only the re-split (see above)")
    parser.add_argument("--pythons", nargs="+", default=[sys.executable])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--worker", choices=["vectorized", "reference", "resplit"], help=argparse.SUPPRESS)
    parser.add_argument("--pool", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "resplit":
        print(json.dumps(run_resplit(args.pool, args.out)))
        return
    if args.worker:
        print(json.dumps(run_pipeline(args.worker, args.pool, args.out)))
        return
    if args.resplit_only:
        print(f"load average before: {os.getloadavg()}", flush=True)
        resplit_only(pool_file(args.questions, args.images, args.groups), args.pythons, args.repeat)
        print(f"load average after: {os.getloadavg()}")
        return

    results: dict = {"check": check_equal(args.check_questions), "runs": []}
    print(f"equality check on {args.check_questions} questions: identical", flush=True)
    scale = args.reference_questions / args.questions
    small = pool_file(args.reference_questions, max(int(args.images * scale), 1), args.groups)
    full = pool_file(args.questions, args.images, args.groups)
    plan = [("vectorized", full), ("vectorized", small), ("reference", small)]
    if args.reference_questions == args.questions:
        plan = [("vectorized", full), ("reference", full)]
    for engine, path in plan:
        result = measured(engine, path, keep=(engine, path) == ("vectorized", full))
        results["runs"].append(result)
        print(f"{engine:10s} {result['questions']:>9,d} questions: {result['total_s']:7.2f} s, peak RSS {result['peak_rss_mb']} MB "
              f"steps {json.dumps(result['steps'])}", flush=True)
    release = TMP / f"out-vectorized-{full.stem}"
    result = measured("resplit", release / "release" / "bench" / "0.0.0-vectorized")
    shutil.rmtree(release, ignore_errors=True)
    results["runs"].append(result)
    print(f"resplit of the full release to 2 of 6 domains: {result['total_s']} s, peak RSS {result['peak_rss_mb']} MB, "
          f"counts {result['report']}", flush=True)
    by = {(r["engine"], r["questions"]): r for r in results["runs"]}
    fast, slow = by[("vectorized", args.reference_questions)], by[("reference", args.reference_questions)]
    algorithm = lambda r: sum(v["s"] for k, v in r["steps"].items() if k in ("balance + split", "balance", "split"))  # noqa: E731
    results["speedup_total"] = round(slow["total_s"] / fast["total_s"], 1)
    results["speedup_balance_split"] = round(algorithm(slow) / algorithm(fast), 1)
    print(f"speed-up at {args.reference_questions:,d} questions: whole path {results['speedup_total']}x, "
          f"balance + split {results['speedup_balance_split']}x")
    TMP.mkdir(parents=True, exist_ok=True)
    (TMP / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
