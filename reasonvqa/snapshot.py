"""Content-addressed ids of input folders, recorded in release manifests."""

from __future__ import annotations

import hashlib
from pathlib import Path


def folder_snapshot_id(path: Path) -> str:
    """sha256 over the relative names and contents of every file under ``path``.

    Hidden files and folders are skipped. A single file hashes its own content.
    """
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    for file in files:
        digest.update(file.name.encode() if file == path else file.relative_to(path).as_posix().encode())
        digest.update(b"\0")
        with file.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()
