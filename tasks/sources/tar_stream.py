"""Walk a tar archive member by member without extracting it, refusing unsafe members.

Only regular files with a plain name are handed on. Directories, links, devices, FIFOs and
names that could escape a folder (a ``/`` after an optional leading ``./``, ``..``, NUL,
an absolute path) are reported as problems instead. A truncated or corrupt archive ends the
walk with one problem naming the byte offset of the last good member; what was read
before it is kept. ``tarfile`` reads every header, so what a member is, and where the walk stops, is its verdict.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator


@dataclass(frozen=True)
class Member:
    """A regular file member: its plain name, its size, and an open stream of its bytes."""

    name: str
    size: int
    offset: int  # byte offset of the member's header in the archive
    stream: IO[bytes]


@dataclass(frozen=True)
class Problem:
    """A member (or the archive's tail) that was not handed on, with a machine-readable reason."""

    reason: str
    name: str
    offset: int
    detail: str = ""


def member_problem(info: tarfile.TarInfo) -> str | None:
    """The reason a member is unsafe or not a regular file, or None when it is fine."""
    if info.issym() or info.islnk():
        return "tar_member_link"
    if info.ischr() or info.isblk() or info.isfifo() or info.isdev():
        return "tar_member_device"
    if info.isdir():
        return "tar_member_directory"
    if not info.isreg():
        return "tar_member_special"
    return name_problem(info.name)


def name_problem(member_name: str) -> str | None:
    """``tar_member_path`` when a regular member's name could leave a folder, else None."""
    name = plain_name(member_name)
    if not name or "/" in name or "\\" in name or "\x00" in name or name in (".", "..") or ".." in name.split("/"):
        return "tar_member_path"
    if name.startswith("..") or name != name.strip():
        return "tar_member_path"
    return None


def plain_name(name: str) -> str:
    """The member name without one leading ``./`` (how ``tar -C dir .`` writes names)."""
    return name[2:] if name.startswith("./") else name


def walk(path: Path) -> Iterator[Member | Problem]:
    """Yield each safe regular member (read its ``stream`` before the next step) or a Problem.

    Member data that is not read is skipped by seeking, so a caller that needs only a
    header reads only the header. The walk ends with a Problem when a member's data runs
    past the end of the file (``tar_truncated``) or when the archive stops without its
    end-of-archive zero block (``tar_truncated`` for a short tail, ``tar_corrupt`` for a
    header that does not parse): ``tarfile`` alone treats both as a normal end.
    """
    try:
        archive = tarfile.open(path, mode="r:")
    except (tarfile.TarError, EOFError, OSError) as error:
        yield Problem("tar_unreadable", path.name, 0, str(error))
        return
    file_size = path.stat().st_size
    with archive:
        while True:
            offset = archive.offset
            try:
                info = archive.next()
            except (tarfile.TarError, EOFError, OSError) as error:
                yield Problem("tar_truncated", path.name, offset, str(error))
                return
            if info is None:
                problem = _end_problem(archive, path.name, file_size)
                if problem is not None:
                    yield problem
                return
            archive.members.clear()  # type: ignore[attr-defined]  # tarfile keeps every header it read (an attribute typeshed omits); a walk needs only this one
            reason = member_problem(info)
            if reason is not None:
                yield Problem(reason, info.name, info.offset, _describe(info))
            elif info.offset_data + info.size > file_size:  # nothing after data that runs past the end can be read
                yield Problem("tar_truncated", info.name, info.offset,
                              f"member data ends at byte {info.offset_data + info.size}, the file at {file_size}")
                return
            else:
                data = archive.extractfile(info)
                assert data is not None  # member_problem lets only regular files through
                yield Member(plain_name(info.name), info.size, info.offset, data)


def _end_problem(archive: tarfile.TarFile, name: str, file_size: int) -> Problem | None:
    """None when the archive ends with a zero block; else why it stopped early."""
    offset = archive.offset
    fileobj = archive.fileobj
    fileobj.seek(offset)
    block = fileobj.read(tarfile.BLOCKSIZE)
    if len(block) < tarfile.BLOCKSIZE:
        return Problem("tar_truncated", name, offset, f"archive ends at byte {file_size} without its end-of-archive block")
    if block.count(0) != tarfile.BLOCKSIZE:
        return Problem("tar_corrupt", name, offset, f"member header at byte {offset} does not parse")
    return None


def _describe(info: tarfile.TarInfo) -> str:
    if info.issym() or info.islnk():
        return f"link to {info.linkname!r}"
    return f"type {info.type!r}"
