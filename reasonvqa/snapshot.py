"""Content-addressed ids of inputs and of the pipeline's own code, for manifests and work folders."""

from __future__ import annotations

import hashlib
from importlib.resources import files
from pathlib import Path
from typing import Iterable, Mapping

CODE_PACKAGES = ("reasonvqa", "reasonvqa.tasks", "reasonvqa.knowledge", "reasonvqa.flows", "reasonvqa.templates")


def folder_snapshot_id(path: Path, recursive: bool = True) -> str:
    """sha256 over the relative names and contents of the files under ``path``.

    Hidden files and folders are skipped. A single file hashes its own content.
    ``recursive=False`` hashes only the files directly in ``path``: source datasets keep
    their annotation files at the top and gigabytes of images in sub-folders.
    """
    if path.is_file():
        return _hash_files(path.parent, [path])
    pattern = path.rglob("*") if recursive else path.glob("*")
    files = sorted(
        p for p in pattern if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    return _hash_files(path, files)


def code_packages() -> dict[str, Path]:
    """Folder of each package whose code or templates decide a build's output."""
    return {name: Path(str(files(name))) for name in CODE_PACKAGES}


def code_fingerprint(roots: Mapping[str, Path] | None = None) -> str:
    """sha256 of the pipeline's Python code and template bank.

    Part of a build's work-folder key, so shard markers written by other code are never
    taken for finished work (a stale marker would silently reuse old outputs). ``roots``
    maps a name to a folder; a folder nested in another root is hashed under its own name
    only, so an editable checkout and a wheel install give the same fingerprint.
    """
    roots = dict(roots or code_packages())
    digest = hashlib.sha256()
    for name, root in sorted(roots.items()):
        nested = [other for other in roots.values() if other != root and other.is_relative_to(root)]
        found = sorted(
            p for p in root.rglob("*")
            if p.is_file() and p.suffix in {".py", ".yaml", ".yml"} and "__pycache__" not in p.parts
            and not any(p.is_relative_to(other) for other in nested)
        )
        digest.update(f"{name}\0{_hash_files(root, found)}\0".encode())
    return "sha256:" + digest.hexdigest()


def files_digest(root: Path, files: Iterable[Path]) -> str:
    """Hex sha256 over each file's name relative to ``root`` and its bytes, in the order given.

    The one content hash of file sets: input snapshots, the code fingerprint, the knowledge
    mirror's snapshot id and the template bank's version.
    """
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        with file.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()


def _hash_files(root: Path, files: list[Path]) -> str:
    return "sha256:" + files_digest(root, files)
