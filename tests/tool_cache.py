"""The test cache: virtual environments of real third-party tools and data the suite needs, made once.

The tools' pins clash with the project's (pyarrow, numpy, Django), so each gets its own environment
under ``$REASONVQA_TEST_CACHE`` (default ``~/.cache/reasonvqa-tests``), reused across runs and checkouts.
``python -m tests.prepare`` (``make install``) makes them all before a timed test run; a test that
finds one missing makes it then. A file lock per entry lets parallel workers (pytest-xdist) and
parallel checkouts share one copy: the first makes it, the others wait and reuse it.
When pip cannot reach the package index the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from filelock import FileLock

DATUMARO = "datumaro==1.13.12"
LABEL_STUDIO = "label-studio==1.23.2"
NUSCENES_DEVKIT = "nuscenes-devkit==1.2.0"
TOOLS = (DATUMARO, LABEL_STUDIO, NUSCENES_DEVKIT)
OFFLINE = ("Could not find a version", "No matching distribution", "Failed to establish", "Network is unreachable",
           "Temporary failure in name resolution", "ProxyError")


def cache_root() -> Path:
    return Path(os.environ.get("REASONVQA_TEST_CACHE", Path.home() / ".cache" / "reasonvqa-tests"))


@contextlib.contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` (across processes) inside the block."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(lock_file)):
        yield


class ToolUnavailable(RuntimeError):
    """pip cannot reach the package index here."""


def install_tool(requirement: str, timeout: int = 1800) -> Path:
    """Python of the cached virtual environment with ``requirement`` installed (made on first use)."""
    folder = cache_root() / requirement.replace("==", "-")
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    marker = folder / ".installed"
    with locked(folder.with_name(folder.name + ".lock")):
        if marker.exists() and marker.read_text() == requirement and python.exists():
            return python
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            text = done.stderr + done.stdout
            if any(s in text for s in OFFLINE):
                raise ToolUnavailable(f"pip cannot install {requirement} from the package index here: "
                                      f"{text.strip().splitlines()[-1] if text.strip() else 'no output'}")
            raise RuntimeError(f"pip install {requirement} failed:\n{text[-3000:]}")
        marker.write_text(requirement)
    return python


def tool_python(requirement: str, timeout: int = 1800) -> Path:
    """``install_tool`` for a test: skipped loudly when the package index is out of reach."""
    try:
        return install_tool(requirement, timeout)
    except ToolUnavailable as why:
        pytest.skip(f"SKIPPED LOUDLY: {why}")


def label_studio_database(python: Path, timeout: int = 1800) -> Path:
    """A Label Studio SQLite database with every migration applied, made once per Label Studio environment
    (``python``, from ``install_tool(LABEL_STUDIO)``) and kept in it.

    ``label-studio start`` on a data folder holding a copy (``label_studio.sqlite3``) finds no migration to
    apply: on a fresh folder it applies about 200, ~45 of the ~50 CPU s its start takes. Users, tokens and
    projects are made by the start and the test as before; the copy holds none."""
    venv = python.parents[1]
    database = venv / "migrated" / "label_studio.sqlite3"
    with locked(venv.with_name(venv.name + "-database.lock")):
        if database.exists():
            return database
        work = venv / "migrating"
        shutil.rmtree(work, ignore_errors=True)
        (work / "data").mkdir(parents=True)
        package = subprocess.run([str(python), "-c", "import label_studio, os; print(os.path.dirname(label_studio.__file__))"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        env = {**os.environ, "HOME": str(work), "LABEL_STUDIO_BASE_DATA_DIR": str(work / "data"), "SENTRY_DSN": "",
               "FRONTEND_SENTRY_DSN": "", "COLLECT_ANALYTICS": "false"}
        done = subprocess.run([str(python), "manage.py", "migrate", "--no-input"], cwd=package, env=env,
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"Label Studio's migrate failed:\n{(done.stderr + done.stdout)[-3000:]}")
        database.parent.mkdir(exist_ok=True)
        (work / "data" / "label_studio.sqlite3").replace(database)  # whole or absent: the lock's next holder checks
        shutil.rmtree(work, ignore_errors=True)
    return database
