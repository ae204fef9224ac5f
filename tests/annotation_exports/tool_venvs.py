"""Virtual environments for real third-party tools (datumaro, Label Studio), made once and cached.

Their pins clash with the project's (pyarrow, numpy, Django), so each gets its own environment
under ``$REASONVQA_TEST_CACHE`` (default ``~/.cache/reasonvqa-tests``), reused across runs.
When pip cannot reach the package index the test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATUMARO = "datumaro==1.13.12"
LABEL_STUDIO = "label-studio==1.23.2"


def cache_root() -> Path:
    return Path(os.environ.get("REASONVQA_TEST_CACHE", Path.home() / ".cache" / "reasonvqa-tests"))


def tool_python(requirement: str, timeout: int = 1800) -> Path:
    """Python of a cached virtual environment with ``requirement`` installed (made on first use)."""
    folder = cache_root() / requirement.replace("==", "-")
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    marker = folder / ".installed"
    if marker.exists() and marker.read_text() == requirement and python.exists():
        return python
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        text = done.stderr + done.stdout
        if any(s in text for s in ("Could not find a version", "No matching distribution", "Failed to establish",
                                   "Network is unreachable", "Temporary failure in name resolution", "ProxyError")):
            pytest.skip(f"SKIPPED LOUDLY: pip cannot install {requirement} from the package index here: "
                        f"{text.strip().splitlines()[-1] if text.strip() else 'no output'}")
        raise RuntimeError(f"pip install {requirement} failed:\n{text[-3000:]}")
    marker.write_text(requirement)
    return python
