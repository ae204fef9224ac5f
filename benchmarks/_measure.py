"""What the benchmarks measure the same way: a process's memory figures and the digests of the files it wrote."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable


def status_kib(key: str, status: Path = Path("/proc/self/status")) -> int | None:
    """A memory figure of ``status`` in KiB (VmHWM: peak RSS, VmRSS: resident now); None when it is absent.

    VmHWM is the process's own peak: ``ru_maxrss`` carries the parent's peak over a fork + exec."""
    for line in status.read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def status_mb(key: str, status: Path = Path("/proc/self/status")) -> float:
    """``status_kib`` in MB (1024 KiB); nan when the figure is absent."""
    kib = status_kib(key, status)
    return float("nan") if kib is None else kib / 1024


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM) in MB."""
    return status_mb("VmHWM")


def sha256_files(root: Path, files: Iterable[Path]) -> dict[str, str]:
    """sha256 of each of ``files`` by its path relative to ``root`` (POSIX), in the order given."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
