"""The benchmarks' one measuring harness: every figure in BENCHMARKS.md is taken the same way.

- Each run is a fresh interpreter (a child process): nothing warm carries over between runs.
- Wall seconds (monotonic clock around the child), CPU seconds (user + system of the child and every
  descendant it waited for: ``wait4``'s resource usage) and peak memory: the kernel's high-water mark
  of resident memory over the process tree (``ru_maxrss`` of the child's ``wait4``, the largest of the
  child's and its reaped descendants' own peaks; the floor is this harness's own RSS at the fork,
  ~30 MB, since a child starts from its parent's pages).
- A/B: two checkouts (each through its own ``.venv``), or two interpreters, run alternately (A B A B ...; the first pair in the other
  order when ``--repeats`` is even), so a change of machine load falls on both; medians are reported.
- The machine's load average is recorded before and after the runs.

Scripts (``bench_*.py``) call ``measure_workload`` with the arguments of their own ``--child`` mode,
which does one measured piece of work and prints one JSON object as its last line (its own figures:
rows, digests, phase times); ``python -m benchmarks.measure -- COMMAND ...`` measures any command.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    """One child run: its figures and the JSON object its last output line held (``{}`` if none)."""

    label: str
    wall_s: float
    cpu_s: float
    peak_mb: float
    returncode: int
    result: dict = field(default_factory=dict)


@dataclass
class Side:
    """One side of an A/B: an interpreter, and the folder whose ``benchmarks`` package it runs."""

    label: str
    python: str
    cwd: Path


def side(spec: str | None, label: str) -> Side:
    """``spec`` as a side of an A/B: a checkout folder (its ``.venv/bin/python``, whose editable install
    imports that checkout's code), an interpreter, or None for this interpreter. The benchmark code is
    this checkout's on both sides, so the two sides differ only in the code under test."""
    if spec is None:
        return Side(label, sys.executable, ROOT)
    path = Path(spec).resolve()
    if path.is_dir():
        venv = path / ".venv" / "bin" / "python"
        if not venv.exists():
            raise SystemExit(f"--baseline {spec}: no .venv/bin/python there (run `make install` in that checkout)")
        return Side(label, str(venv), ROOT)
    return Side(label, str(path), ROOT)


def run_once(argv: list[str], cwd: Path = ROOT, env: dict | None = None, label: str = "") -> Run:
    """Run ``argv`` once in a fresh process; wall and CPU seconds, peak RSS of the process tree."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{stderr[-3000:]}")
    return Run(label, round(wall, 3), round(usage.ru_utime + usage.ru_stime, 3), round(usage.ru_maxrss / 1024, 1),
               proc.returncode, _last_json(stdout))


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        return value if isinstance(value, dict) else {"value": value}
    return {}


def own_peak_mb(status: Path = Path("/proc/self/status")) -> float:
    """This process's own peak RSS (VmHWM) in MB, for phase figures inside a child run; nan where absent.

    Not ``ru_maxrss``: that carries the parent's peak over a fork + exec."""
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sha256_files(root: Path, files: Iterable[Path]) -> dict[str, str]:
    """sha256 of each of ``files`` by its path relative to ``root`` (POSIX), in the order given."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def alternate(sides: list[Side], argv_of, repeats: int, env: dict | None = None) -> list[Run]:
    """``repeats`` runs of each side, alternating; ``argv_of(side)`` is the command for a side."""
    runs = []
    for repeat in range(repeats):
        order = sides if repeat % 2 == 0 or len(sides) == 1 else sides[::-1]
        for s in order:
            runs.append(run_once(argv_of(s), cwd=s.cwd, env=env, label=s.label))
    return runs


def medians(runs: list[Run]) -> dict[str, dict]:
    """Median wall, CPU and peak of each label's runs (and how many runs that is)."""
    out: dict[str, dict] = {}
    for label in dict.fromkeys(r.label for r in runs):
        mine = [r for r in runs if r.label == label]
        out[label] = {"runs": len(mine), **{key: round(statistics.median(getattr(r, key) for r in mine), 3)
                                            for key in ("wall_s", "cpu_s", "peak_mb")}}
    return out


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def report(title: str, runs: list[Run], load_before: list[float], extra: dict | None = None) -> dict:
    """Print a table of the medians with the load, and return everything as one JSON-ready dict."""
    summary = medians(runs)
    load_after = load_average()
    print(f"\n{title}  (load before {load_before}, after {load_after}; cpus {os.cpu_count()})")
    print(f"{'side':<24}{'runs':>6}{'wall s':>10}{'CPU s':>10}{'peak MB':>10}")
    for label, figures in summary.items():
        print(f"{label:<24}{figures['runs']:>6}{figures['wall_s']:>10.2f}{figures['cpu_s']:>10.2f}"
              f"{figures['peak_mb']:>10.0f}")
    return {"title": title, "medians": summary, "runs": [asdict(r) for r in runs], "load_before": load_before,
            "load_after": load_after, "cpus": os.cpu_count(), **(extra or {})}


def parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark script shares: repeats, the A/B baseline, where the JSON goes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repeats", type=int, default=3, help="runs of each side (median reported)")
    p.add_argument("--baseline", help="a checkout folder or an interpreter to compare with (A/B, alternating)")
    p.add_argument("--json", type=Path, help="write all runs and medians here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one measured run (internal)
    return p


def mode_argv(argv: list[str] | None, modes: Iterable[str], default: str) -> list[str]:
    """``argv`` (``sys.argv[1:]`` if None) with ``default`` first unless it starts with one of ``modes`` or asks
    for help: a script of several modes keeps its default mode's command line."""
    argv = sys.argv[1:] if argv is None else list(argv)
    return argv if argv[:1] and argv[0] in {*modes, "-h", "--help"} else [default, *argv]


def measure_workload(module: str, child_args: list[str], args: argparse.Namespace, title: str,
                     labels: tuple[str, str] = ("this checkout", "baseline")) -> dict:
    """Run ``python -m module --child child_args`` on this checkout (and ``--baseline``), report medians."""
    sides = [side(None, labels[0])] + ([side(args.baseline, labels[1])] if args.baseline else [])
    load_before = load_average()
    runs = alternate(sides, lambda s: [s.python, "-m", module, "--child", *child_args], args.repeats)
    result = report(title, runs, load_before)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


def child_result(result: dict) -> None:
    """A ``--child`` run's own figures: the last line of its output, read by ``run_once``."""
    print(json.dumps(result, sort_keys=True, default=str))


def main(argv: list[str] | None = None) -> int:
    p = parser("Measure any command: python -m benchmarks.measure [--repeats N] [--baseline PYTHON] -- COMMAND ...")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command")
    sides = [side(None, "this interpreter")] + ([side(args.baseline, "baseline")] if args.baseline else [])
    python_first = command[0] in ("python", "python3")

    def argv_of(s: Side) -> list[str]:  # "python ..." runs with each side's interpreter
        return [s.python, *command[1:]] if python_first else command

    load_before = load_average()
    result = report(" ".join(command), alternate(sides, argv_of, args.repeats), load_before)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
