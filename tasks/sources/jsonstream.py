"""Stream the records of a top-level JSON array without loading the file.

A file that stops parsing part-way (truncated, corrupt, trailing garbage) is not an
exception for the caller: the records read so far are yielded, then one
``StreamFailure`` that names the file, the index of the first record not read and
the byte range in which the parser stopped. JSON has no resynchronisation point,
so nothing after a syntax error can be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import ijson

_BOM = b"\xef\xbb\xbf"
_READ_SIZE = 1 << 16


@dataclass(frozen=True)
class StreamFailure:
    """Why and where a JSON file stopped parsing."""

    reason: str  # "json_truncated", "json_parse_error", "json_not_array"
    file: str
    index: int  # index of the first record that could not be read
    byte_start: int  # the parser stopped inside bytes [byte_start, byte_end)
    byte_end: int
    message: str

    @property
    def location(self) -> str:
        return f"{self.file}#[{self.index}]@bytes[{self.byte_start}:{self.byte_end}]"


class _TrackingReader:
    """File wrapper that remembers the byte range of the last read and drops a UTF-8 BOM."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.start = 0
        self.end = 0
        head = handle.read(len(_BOM))
        if head == _BOM:
            self.end = len(_BOM)
            self._pending = b""
        else:
            self._pending = head

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson probes the stream type with read(0)
            return b""
        chunk = self._pending + self._handle.read(size if size >= 0 else -1)
        self._pending = b""
        if chunk:  # an empty read (end of file) keeps the range of the last data read
            self.start, self.end = self.end, self.end + len(chunk)
        return chunk

    def first_significant_byte(self) -> bytes:
        """The first non-whitespace byte, kept for the parser."""
        while True:
            chunk = self._pending or self._handle.read(_READ_SIZE)
            if not chunk:
                return b""
            stripped = chunk.lstrip()
            self.end += len(chunk) - len(stripped)
            self._pending = stripped
            if stripped:
                return stripped[:1]


def iter_json_array(path: Path, label: str | None = None) -> Iterator[tuple[int, object] | StreamFailure]:
    """Yield ``(index, record)`` for each element of the top-level array in ``path``.

    Ends with one ``StreamFailure`` if the file is not an array or stops parsing.
    ``label`` names the file in locations (default: its file name).
    """
    name = label or path.name
    with open(path, "rb") as handle:
        reader = _TrackingReader(handle)
        first = reader.first_significant_byte()
        if first != b"[":
            what = "an empty file" if not first else f"a file starting with {first!r}"
            yield StreamFailure("json_not_array", name, 0, reader.end, reader.end, f"expected a JSON array, found {what}")
            return
        index = 0
        try:
            for record in ijson.items(reader, "item", use_float=True):
                yield index, record
                index += 1
        except ijson.JSONError as error:
            text = str(error)
            reason = "json_truncated" if "premature EOF" in text else "json_parse_error"
            yield StreamFailure(reason, name, index, reader.start, reader.end, text.strip())
