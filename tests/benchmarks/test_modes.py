"""Scripts of two modes (benchmarks/README.md), run as the command line a benchmark user runs: without a mode the
default mode's options apply, each mode takes only its own options. A bad value stops the run at parsing, so no
benchmark runs here."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("script", "args", "error"), [
    ("bench_sparql_batching", ["--batch", "x"], "bench_sparql_batching.py batching: error: argument --batch: "
                                                "invalid int value: 'x'"),
    ("bench_sparql_batching", ["mirror", "--batch", "2"], "bench_sparql_batching.py: error: unrecognized arguments: "
                                                         "--batch 2"),
    ("bench_verified_sandbox", ["offline", "--max-tokens", "x"], "bench_verified_sandbox.py offline: error: argument "
                                                                 "--max-tokens: invalid int value: 'x'"),
])
def test_a_mode_parses_its_own_options(script, args, error):
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{script}", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.splitlines()[-1] == error
