"""Probe: where the release job's memory goes, phase by phase (RSS sampled every 20 ms).

    flock /tmp/bench.lock python -m benchmarks.bench_rss_phases [--size 4200000] [--engine partitioned|project]
        [--pythons /base/tree/.venv/bin/python .venv/bin/python] [--repeat 1]

Each run is a fresh interpreter (``--pythons``: one per checkout, alternating; the probe script is this one, the
code under test is whatever ``reasonvqa`` that interpreter imports) running bench_release_floor's worker path
(``run_partitioned`` or ``run_project``) with its phases wrapped: a phase is one of the functions named in
``PHASES``, entered and left on the main thread (nested phases: the innermost counts). Per phase it prints the
highest sampled RSS, the RSS when it began and the growth of the process's high-water mark (``ru_maxrss``)
while it ran, so the phase that sets the job's peak is the one with the last growth, sampled or not.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.bench_release_floor import TMP, pool_files, run_partitioned, run_project

# (module, attribute, phase): functions looked up in the namespace they are called from; absent ones are skipped
PHASES = [
    ("reasonvqa.tasks.balance.partitioned", "read_columns", "read key columns"),
    ("reasonvqa.tasks.balance.pipeline", "with_group_keys", "group keys"),
    ("reasonvqa.tasks.balance.codes", "byte_order", "question_id sort"),
    ("reasonvqa.tasks.balance.balance", "_invalid_codes", "invalid rows"),
    ("reasonvqa.tasks.balance.balance", "_encode", "balance encoding"),
    ("reasonvqa.tasks.balance.balance", "_run_rounds", "rounds"),
    ("reasonvqa.tasks.balance.balance", "_removed_table", "removed table"),
    ("reasonvqa.tasks.balance.balance", "gather_removed", "removed table"),
    ("reasonvqa.tasks.balance.pipeline", "gather_removed", "removed table"),
    ("reasonvqa.tasks.balance.balance", "balance_report", "balance report"),
    ("reasonvqa.tasks.balance.pipeline", "_apply_hop_mix", "hop mix"),
    ("reasonvqa.tasks.balance.pipeline", "split_images", "split"),
    ("reasonvqa.tasks.balance.partitioned", "_SeenInTrain.__call__", "seen in train"),
    ("reasonvqa.tasks.balance.pipeline", "_drop_test_rows", "drop seen rows"),
    ("reasonvqa.tasks.balance.pipeline", "check_partition", "check partition"),
    ("reasonvqa.tasks.balance.partitioned", "decide", "decide (rest)"),
    ("reasonvqa.tasks.balance.pipeline", "decide", "decide (rest)"),
    ("reasonvqa.tasks.balance.partitioned", "_spill", "spill"),
    ("reasonvqa.tasks.balance.partitioned", "plan_partitioned", "plan (rest)"),
    ("reasonvqa.tasks.balance.stats", "start_stats", "stats"),
    ("reasonvqa.tasks.release.writer", "write_release", "write"),
]
PAGE = os.sysconf("SC_PAGE_SIZE")


class Probe:
    """A phase stack on the main thread and a sampler thread reading this process's RSS."""

    def __init__(self, every: float = 0.02):
        self.stack = ["start"]
        self.order: list[str] = []
        self.sampled: dict[str, int] = {}
        self.began: dict[str, int] = {}
        self.grew: dict[str, int] = {}  # growth of ru_maxrss (MB) while the phase (innermost) was on top
        self.every, self.done = every, threading.Event()
        self.mark = self._maxrss()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE // (1 << 20)

    @staticmethod
    def _maxrss() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

    def _sample(self) -> None:
        while not self.done.wait(self.every):
            phase = self.stack[-1]
            self.sampled[phase] = max(self.sampled.get(phase, 0), self._rss())

    def _switch(self) -> None:
        """Credit the high-water mark's growth since the last switch to the phase on top."""
        now = self._maxrss()
        phase = self.stack[-1]
        self.grew[phase] = self.grew.get(phase, 0) + now - self.mark
        self.mark = now

    def wrap(self, fn, phase: str):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            self._switch()
            self.stack.append(phase)
            if phase not in self.began:
                self.order.append(phase)
                self.began[phase] = self._rss()
            try:
                return fn(*args, **kwargs)
            finally:
                self._switch()
                self.stack.pop()
        return wrapped

    def install(self) -> None:
        for module_name, attr, phase in PHASES:
            owner = importlib.import_module(module_name)
            *path, name = attr.split(".")
            for part in path:
                owner = getattr(owner, part, None)
            if owner is not None and hasattr(owner, name):
                setattr(owner, name, self.wrap(getattr(owner, name), phase))

    def report(self) -> list[dict]:
        self._switch()
        return [{"phase": p, "began_mb": self.began.get(p), "sampled_max_mb": self.sampled.get(p),
                 "maxrss_growth_mb": self.grew.get(p, 0)} for p in ["start", *self.order]]


def worker(engine: str, paths: list[Path], out: Path) -> dict:
    probe = Probe()
    probe.install()
    probe.thread.start()
    started = time.process_time()
    result = run_partitioned(paths, out) if engine == "partitioned" else run_project(paths[0], out)
    probe.done.set()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"s": round(result["s"], 2), "cpu_s": round(time.process_time() - started, 2),
            "peak_mb": usage.ru_maxrss // 1024, "steps": result["steps"], "phases": probe.report()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=4_200_000)
    parser.add_argument("--engine", choices=("partitioned", "project"), default="partitioned")
    parser.add_argument("--pythons", nargs="+", default=[sys.executable])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=TMP / "out-rss-phases")
    args = parser.parse_args()
    paths = pool_files(args.size)
    if args.worker:
        print(json.dumps(worker(args.engine, paths, args.out)))
        return
    print("load before:", open("/proc/loadavg").read().strip(), flush=True)
    for rep in range(args.repeat):
        for python in args.pythons[rep % len(args.pythons):] + args.pythons[:rep % len(args.pythons)]:
            shutil.rmtree(args.out, ignore_errors=True)
            cmd = [python, "-m", "benchmarks.bench_rss_phases", "--worker", "--size", str(args.size),
                   "--engine", args.engine, "--out", str(args.out)]
            done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"\n{python} ({args.engine}, {args.size:,d}): wall {result['s']} s, cpu {result['cpu_s']} s, "
                  f"peak {result['peak_mb']:,d} MB, steps {json.dumps(result['steps'])}")
            print(f"  {'phase':20s} {'began MB':>9s} {'max sampled':>12s} {'peak growth':>12s}")
            for row in result["phases"]:
                print(f"  {row['phase']:20s} {row['began_mb'] or 0:9,d} {row['sampled_max_mb'] or 0:12,d} "
                      f"{row['maxrss_growth_mb']:12,d}")
    shutil.rmtree(args.out, ignore_errors=True)
    print("load after:", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
