"""Where a release may be written: checked names and versions, paths that stay inside the output folder.

A release lives at ``<out>/<name>/<version>/``. ``name`` and ``version`` come from configs,
flags and (for re-splits) other releases' manifests, so both are checked before any path is
built from them, and every path is resolved and refused unless it lies inside ``<out>``.
"""

from __future__ import annotations

import os
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


# the longest name the writer derives from a version: ".<version>.tmp-<pid>" (a pid has up to 10 digits)
_VERSION_NAME_EXTRA = len("..tmp-") + 10


def name_limit(folder: Path) -> int:
    """The file system's limit on one name's bytes (PC_NAME_MAX) where ``folder`` is or would be created."""
    existing = Path(folder).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        return os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_name_lengths(out_root: Path, name: str, version: str) -> None:
    """ReleasePathError, before any work, when ``<name>`` or a folder named after ``version`` (its staging
    folder ``.<version>.tmp-<pid>`` is the longest) would pass the file system's limit on a name."""
    limit = name_limit(out_root)
    if len(name.encode()) > limit:
        raise ReleasePathError(f"release name is {len(name.encode())} bytes; the file system under {out_root} "
                               f"allows {limit} bytes per name")
    check_version_length(out_root, version, limit)


def check_version_length(out_root: Path, version: str, limit: int | None = None) -> None:
    """ReleasePathError when a folder named after ``version`` (``.<version>.tmp-<pid>`` the longest) would
    pass the file system's limit on a name under ``out_root`` (``limit``: that limit, when known)."""
    limit = name_limit(out_root) if limit is None else limit
    if len(version.encode()) + _VERSION_NAME_EXTRA > limit:
        raise ReleasePathError(f"release version is {len(version.encode())} bytes; the file system under {out_root} "
                               f"allows {limit - _VERSION_NAME_EXTRA} (its staging folder's name adds {_VERSION_NAME_EXTRA})")


def release_dir(out_root: Path, name: str, version: str) -> Path:
    """The resolved ``<out_root>/<name>/<version>`` after checking name, version (their lengths too) and containment."""
    check_release_name(name)
    check_release_version(version)
    check_name_lengths(out_root, name, version)
    path = inside(out_root, Path(out_root) / name / version)
    if path.parent.parent != Path(out_root).resolve():  # e.g. <out>/<name> is a symlink elsewhere
        raise ReleasePathError(f"{Path(out_root) / name / version} resolves to {path}, not <out>/<name>/<version>")
    return path


def check_output_folder(out_root: Path) -> Path:
    """``out_root`` resolved; ReleasePathError if it exists and is not a folder."""
    path = Path(out_root)
    if path.exists() and not path.is_dir():
        raise ReleasePathError(f"--out {path} exists and is not a folder")
    for parent in path.absolute().parents:  # the nearest existing one must be a folder to create it in
        if parent.exists():
            if not parent.is_dir():
                raise ReleasePathError(f"--out {path}: {parent} is a file, not a folder")
            break
    return path.resolve()


def default_work_folder(out_root: Path, path: Path) -> Path:
    """``path`` (a work folder the build chose under ``out_root``, e.g. ``<out>/.work/<key>``) unchanged;
    ReleasePathError if a symlink on the way leads outside ``out_root``: a build writes nothing outside
    ``--out`` unless ``--work`` names the folder explicitly."""
    try:
        inside(out_root, path)
    except ReleasePathError:
        raise ReleasePathError(f"{path} resolves to {Path(path).resolve()}, outside the output folder "
                               f"{Path(out_root).resolve()} (a symlink); name it with --work to build there") from None
    for link in _symlinks_under(Path(path)):  # its stage folders, shard folders and files: none may lead elsewhere
        if not inside_or_none(out_root, link):
            raise ReleasePathError(f"{link} is a symlink to {link.resolve()}, outside the output folder "
                                   f"{Path(out_root).resolve()}; name the work folder with --work to build there")
    return Path(path)


def _symlinks_under(folder: Path) -> list[Path]:
    """Every symlink below ``folder`` (links are not followed), sorted; none when it is no folder."""
    links, pending = [], [folder]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except (NotADirectoryError, FileNotFoundError):
            continue
        for entry in entries:
            if entry.is_symlink():
                links.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
    return sorted(links)


def inside_or_none(root: Path, path: Path) -> Path | None:
    """``inside(root, path)``, or None where it is outside."""
    try:
        return inside(root, path)
    except ReleasePathError:
        return None
