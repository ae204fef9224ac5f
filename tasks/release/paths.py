"""Where a release may be written: checked names and versions, paths that stay inside the output folder.

A release lives at ``<out>/<name>/<version>/``. ``name`` and ``version`` come from configs,
flags and (for re-splits) other releases' manifests, so both are checked before any path is
built from them, and every path is resolved and refused unless it lies inside ``<out>``.
"""

from __future__ import annotations

import re
from pathlib import Path

import semver

from reasonvqa.errors import UsageError

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


class ReleasePathError(UsageError):
    """A release name, version or path that would leave the output folder or is not allowed."""


def check_release_name(name: str) -> str:
    """``name`` if it is lowercase letters, digits, ``.``, ``_``, ``-`` (starting alphanumeric, no ``..``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise ReleasePathError(
            f"release name {name!r} is not allowed: use lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, without '..'"
        )
    return name


def check_release_version(version: str) -> str:
    """``version`` if it is a semantic version (https://semver.org), e.g. ``2026.11.0`` or ``0.1.0-gld``."""
    if not isinstance(version, str) or not semver.Version.is_valid(version):
        raise ReleasePathError(f"release version {version!r} is not a semantic version such as 1.0.0 or 1.0.0-rc.1")
    return version


def inside(root: Path, path: Path) -> Path:
    """``path`` resolved, or ReleasePathError if it does not lie inside ``root`` (resolved)."""
    base = Path(root).resolve()
    resolved = Path(path).resolve()
    if resolved == base or not resolved.is_relative_to(base):
        raise ReleasePathError(f"{path} resolves to {resolved}, outside the output folder {base}")
    return resolved


def release_dir(out_root: Path, name: str, version: str) -> Path:
    """The resolved ``<out_root>/<name>/<version>`` after checking name, version and containment."""
    check_release_name(name)
    check_release_version(version)
    path = inside(out_root, Path(out_root) / name / version)
    if path.parent.parent != Path(out_root).resolve():  # e.g. <out>/<name> is a symlink elsewhere
        raise ReleasePathError(f"{Path(out_root) / name / version} resolves to {path}, not <out>/<name>/<version>")
    return path


def check_output_folder(out_root: Path) -> Path:
    """``out_root`` resolved; ReleasePathError if it exists and is not a folder."""
    path = Path(out_root)
    if path.exists() and not path.is_dir():
        raise ReleasePathError(f"--out {path} exists and is not a folder")
    return path.resolve()
