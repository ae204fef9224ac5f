"""benchmarks/measure.py, run as the command line a benchmark user runs (tests do not import benchmarks)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a grandchild holds 300 MB while the child itself stays small: the peak is the process tree's
GRANDCHILD = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
              "'x = bytearray(300 * 2**20); x[::4096] = b\"1\" * len(x[::4096])'], check=True); print('{\"ok\": 1}')")
BUSY = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\nprint('{\"spun\": 0.6}')"


def measure(tmp_path, *args: str) -> dict:
    out = tmp_path / "runs.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks.measure", "--json", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_peak_memory_is_the_high_water_mark_of_the_process_tree(tmp_path):
    result = measure(tmp_path, "--repeats", "1", "--", "python", "-c", GRANDCHILD)
    (run,) = result["runs"]
    assert 300 <= run["peak_mb"] < 400 and run["result"] == {"ok": 1} and run["returncode"] == 0
    assert len(result["load_before"]) == 3 and len(result["load_after"]) == 3 and result["cpus"] >= 1


def test_cpu_seconds_count_the_child_and_an_ab_alternates_with_medians(tmp_path):
    result = measure(tmp_path, "--repeats", "3", "--baseline", sys.executable, "--", "python", "-c", BUSY)
    labels = [run["label"] for run in result["runs"]]
    assert labels == ["this interpreter", "baseline", "baseline", "this interpreter", "this interpreter", "baseline"]
    assert all(run["cpu_s"] >= 0.6 and run["wall_s"] >= run["cpu_s"] * 0.5 for run in result["runs"])
    for label, figures in result["medians"].items():
        mine = sorted(run["wall_s"] for run in result["runs"] if run["label"] == label)
        assert figures["runs"] == 3 and figures["wall_s"] == mine[1]  # the middle of three


def test_a_failing_command_fails_the_measurement(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.measure", "--repeats", "1", "--", "python", "-c",
                           "raise SystemExit(3)"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "exited 3" in done.stderr
