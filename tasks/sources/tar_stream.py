"""Walk a tar archive member by member without extracting it, refusing unsafe members.

Only regular files with a plain name are handed on. Directories, links, devices, FIFOs and
names that could escape a folder (a ``/`` after an optional leading ``./``, ``..``, NUL,
an absolute path) are reported as problems instead. A truncated or corrupt archive ends the
walk with one problem naming the byte offset of the last good member; what was read
before it is kept.

Plain regular-file headers (type ``0``, octal numbers, no ustar prefix, a valid checksum, no pax
header in force) are read here directly: ``tarfile`` spends ~11 us more per header, half of the walk.
Any other block goes to ``tarfile`` itself, so what a member is, and where the walk stops, is its verdict.
"""

from __future__ import annotations

import re
import struct
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Callable, Iterator


DIRECT_HEADERS = True  # False: every header through tarfile (the tests compare the two)


@dataclass(frozen=True)
class Member:
    """A regular file member: its plain name, its size, and an open stream of its bytes."""

    name: str
    size: int
    offset: int  # byte offset of the member's header in the archive
    stream: IO[bytes] | MemberStream


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
        fileobj = archive.fileobj
        while True:
            offset = archive.offset
            plain = None
            if DIRECT_HEADERS and archive.firstmember is None and not archive.pax_headers:  # open() read the first
                before = fileobj.tell()
                fileobj.seek(offset)
                plain = _plain_header(fileobj.read(tarfile.BLOCKSIZE), archive.encoding, archive.errors)
                if plain is None:  # tarfile checks the end of data by where the file stands: leave it as it was
                    fileobj.seek(before)
            if plain is not None:
                name, size = plain
                data_offset = offset + tarfile.BLOCKSIZE
                archive.offset = data_offset + -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE  # tarfile's next header
                item = _checked(name, name_problem(name), offset, data_offset, size, file_size,
                                f"type {tarfile.REGTYPE!r}", lambda: MemberStream(fileobj, data_offset, size))
                yield item
                if _ends_walk(item):
                    return
                continue
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
            reason = member_problem(info)
            item = _checked(info.name, reason, info.offset, info.offset_data, info.size, file_size,
                            _describe(info) if reason else "", lambda: archive.extractfile(info))
            yield item
            if _ends_walk(item):
                return


def _checked(name: str, reason: str | None, offset: int, data_offset: int, size: int, file_size: int, detail: str,
             open_stream: Callable[[], Any]) -> Member | Problem:
    """The member, or its Problem: ``reason`` (unsafe name or kind) or data running past the file's end."""
    if reason is not None:
        return Problem(reason, name, offset, detail)
    if data_offset + size > file_size:
        return Problem("tar_truncated", name, offset, f"member data ends at byte {data_offset + size}, the file at {file_size}")
    return Member(plain_name(name), size, offset, open_stream())


def _ends_walk(item: Member | Problem) -> bool:
    """A member whose data runs past the file's end ends the walk (nothing after it can be read)."""
    return isinstance(item, Problem) and item.reason == "tar_truncated"


class MemberStream:
    """The bytes of one member, read from the archive file (what ``tarfile.extractfile`` gives, unbuffered)."""

    def __init__(self, fileobj: BinaryIO, start: int, size: int) -> None:
        self.fileobj, self.start, self.size, self.position = fileobj, start, size, 0

    def read(self, n: int | None = -1) -> bytes:
        n = self._next(n)
        data = self.fileobj.read(n) if n else b""
        self._advance(n, len(data))
        return data

    def readinto(self, buffer: memoryview) -> int:
        """Read up to ``len(buffer)`` bytes straight into ``buffer`` (no intermediate bytes object)."""
        n = self._next(len(buffer))
        self._advance(n, self.fileobj.readinto(buffer[:n]) if n else 0)
        return n

    def _next(self, n: int | None) -> int:
        """How many bytes a read of ``n`` gets (all that is left for None or < 0), the file placed for it."""
        remaining = self.size - self.position
        n = remaining if n is None or n < 0 else min(n, remaining)
        at = self.start + self.position
        if n > 0 and self.fileobj.tell() != at:
            self.fileobj.seek(at)
        return max(n, 0)

    def _advance(self, wanted: int, got: int) -> None:
        if got != wanted:
            raise tarfile.ReadError("unexpected end of data")  # as tarfile's member reader says
        self.position += got


_OCTAL = re.compile(rb" *([0-7]*) *(?:\0.*)?", re.DOTALL)  # a number field tarfile.nti reads as octal
_NUMBERS = struct.Struct("100x8s8s8s12s12s8s173x8s8s")  # mode, uid, gid, size, mtime, chksum; devmajor, devminor


def _plain_header(block: bytes, encoding: str, errors: str) -> tuple[str, int] | None:
    """(name, size) when ``block`` is a header that ``tarfile`` reads as a plain regular file with exactly
    this name and size: type ``0``, an empty ustar prefix, every number field octal digits, the unsigned
    checksum right. None for anything else (``tarfile`` then reads the block itself)."""
    if len(block) != tarfile.BLOCKSIZE or block[156] != 0x30 or block[345] != 0:
        return None
    digits = []
    for field in _NUMBERS.unpack_from(block):
        match = _OCTAL.fullmatch(field)
        if match is None:
            return None
        digits.append(match[1])
    if int(digits[5] or b"0", 8) != 256 + sum(block) - sum(block[148:156]):
        return None
    return tarfile.nts(block[:100], encoding, errors), int(digits[3] or b"0", 8)


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
