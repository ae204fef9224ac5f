"""Stream the records of a top-level JSON array without loading the file.

A file with trailing garbage after its array (or no array at all) is not an exception
for the caller: the records read are yielded, then one ``StreamFailure`` that names the
file, the index of the first record not read and the byte range in which the parser
stopped. A file cut short (truncated) raises ``JsonSourceError``: the rest of the file,
however many records, is missing, which is no reject of one record.

A file that is corrupt inside its array (an invalid UTF-8 byte, ``NaN``, a number too large
for a double or a 64-bit integer, a syntax error) raises ``JsonSourceError``: JSON has no
resynchronisation point, so every record after the bad one would be lost, and a build
must not finish as if they never existed. So does a record nested deeper than
``MAX_DEPTH`` or larger than ``MAX_RECORD_BYTES``, found by a vectorized scan of each
chunk before the parser sees it (a deeply nested record exhausts the parser's memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import ijson
import numpy as np

from reasonvqa.errors import DataError

_BOM = b"\xef\xbb\xbf"
_READ_SIZE = 1 << 16
MAX_DEPTH = 64  # Visual Genome records nest 5 levels
MAX_RECORD_BYTES = 256 << 20  # the largest scene_graphs.json record is a few MB


class JsonSourceError(DataError):
    """A JSON source file that cannot be read past a point inside its array."""


class _Structure:
    """Tracks nesting depth and the start of the current top-level element across chunks (numpy, per chunk).

    Strings are skipped (a quote counts unless preceded by an odd run of backslashes), so
    brackets inside text do not count. ``feed`` returns a problem description or None.
    """

    def __init__(self, max_depth: int, max_record_bytes: int) -> None:
        self.max_depth, self.max_record_bytes = max_depth, max_record_bytes
        self.depth = 0
        self.in_string = False
        self.backslashes = 0  # backslashes ending the previous chunk
        self.element_start = 0  # file offset after the last byte seen at the array's own level

    def feed(self, chunk: bytes, offset: int) -> tuple[str, int] | None:
        data = np.frombuffer(chunk, dtype=np.uint8)
        if len(data) == 0:
            return None
        where = np.flatnonzero(_KIND[data])  # quotes, brackets, braces, backslashes: a small share of bytes
        kind = _KIND[data[where]]
        quote = kind == _QUOTE
        if self.backslashes or b"\\" in chunk:
            quote &= self._unescaped(data)[where]
        inside_after = (np.cumsum(quote) % 2 == 1) ^ self.in_string
        inside_before = np.concatenate(([self.in_string], inside_after[:-1]))
        structural = ~inside_before & ~quote
        step = (structural & (kind == _OPEN)).astype(np.int64) - (structural & (kind == _CLOSE))
        depth = self.depth + np.cumsum(step)
        deep = np.flatnonzero(depth > self.max_depth)
        if deep.size:
            return f"nesting deeper than {self.max_depth} levels", offset + int(where[deep[0]])
        top = np.flatnonzero(structural & (depth <= 1))
        if top.size:
            self.element_start = offset + int(where[top[-1]]) + 1
        if offset + len(data) - self.element_start > self.max_record_bytes:
            return f"a record larger than {self.max_record_bytes} bytes", self.element_start
        if where.size:
            self.depth = int(depth[-1])
            self.in_string = bool(inside_after[-1])
        return None

    def _unescaped(self, data: np.ndarray) -> np.ndarray:
        """Per byte: not preceded by an odd run of backslashes (carried across chunks)."""
        positions = np.arange(len(data))
        last_plain = np.maximum.accumulate(np.where(data != _BACKSLASH, positions, -1))
        before = np.concatenate(([-1], last_plain[:-1]))  # last non-backslash before each byte
        run = positions - 1 - before + np.where(before == -1, self.backslashes, 0)
        tail = len(data) - 1 - int(last_plain[-1])
        self.backslashes = tail + (self.backslashes if last_plain[-1] == -1 else 0)
        return run % 2 == 0


_QUOTE, _OPEN, _CLOSE, _BACKSLASH = 1, 2, 3, 92
_KIND = np.zeros(256, dtype=np.uint8)
_KIND[ord('"')] = _QUOTE
_KIND[[ord("["), ord("{")]] = _OPEN
_KIND[[ord("]"), ord("}")]] = _CLOSE
_KIND[_BACKSLASH] = 4


def deepest_point(data: bytes, max_depth: int = MAX_DEPTH) -> int | None:
    """The byte offset where JSON text ``data`` first nests deeper than ``max_depth``; None if it never does."""
    found = _Structure(max_depth, len(data) + 1).feed(data, 0)
    return found[1] if found and found[0].startswith("nesting") else None


def read_json_document(path: Path, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_RECORD_BYTES) -> object:
    """A whole small JSON file (a scene graph, a config), parsed once its size and nesting are checked:
    JsonSourceError naming the file for one too large, too deep (which would exhaust the parser's
    stack) or not JSON, instead of a MemoryError or RecursionError."""
    import json

    path = Path(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise JsonSourceError(f"{path}: {size} bytes, more than the {max_bytes} a single JSON document may have here")
    data = path.read_bytes()
    deep = deepest_point(data, max_depth)
    if deep is not None:
        raise JsonSourceError(f"{path}: nesting deeper than {max_depth} levels at byte {deep}")
    try:
        return json.loads(data)
    except ValueError as exc:  # not JSON, not UTF-8, or a number of more digits than Python converts
        raise JsonSourceError(f"{path}: not JSON ({' '.join(str(exc).split())})") from None


class _TooDeepOrLarge(Exception):
    def __init__(self, what: str, at: int) -> None:
        super().__init__(what)
        self.what, self.at = what, at


@dataclass(frozen=True)
class StreamFailure:
    """Why and where a JSON file stopped parsing."""

    reason: str  # "json_parse_error", "json_not_array"
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

    def __init__(self, handle: BinaryIO, structure: _Structure | None = None) -> None:
        self._handle = handle
        self._structure = structure
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
            if self._structure is not None and (problem := self._structure.feed(chunk, self.start)):
                raise _TooDeepOrLarge(*problem)
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


def iter_json_array(path: Path, label: str | None = None, *, max_depth: int = MAX_DEPTH,
                    max_record_bytes: int = MAX_RECORD_BYTES) -> Iterator[tuple[int, object] | StreamFailure]:
    """Yield ``(index, record)`` for each element of the top-level array in ``path``.

    Ends with one ``StreamFailure`` if the file is not an array or has trailing garbage;
    raises ``JsonSourceError`` (naming file, record index and byte offset) when it is cut
    short, corrupt inside the array, or a record is too deep or too large.
    ``label`` names the file in locations (default: its file name).
    """
    name = label or path.name
    with open(path, "rb") as handle:
        reader = _TrackingReader(handle, _Structure(max_depth, max_record_bytes))
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
        except _TooDeepOrLarge as problem:
            raise JsonSourceError(f"{path}: {problem.what} at byte {problem.at} (records [0:{index}] were read); "
                                  "the records after it cannot be read") from None
        except ijson.JSONError as error:
            text = " ".join(str(error).split())
            if "premature EOF" in text:
                raise JsonSourceError(f"{path}: truncated: the file ends inside record [{index}] (bytes "
                                      f"[{reader.start}:{reader.end}]); records [0:{index}] were read, the rest of "
                                      "the file is missing") from None
            elif "trailing garbage" in text:  # the whole array was read
                yield StreamFailure("json_parse_error", name, index, reader.start, reader.end, text)
            else:
                raise JsonSourceError(f"{path}: invalid JSON in record [{index}] within bytes "
                                      f"[{reader.start}:{reader.end}] ({text}); the records after it cannot "
                                      "be read: fix or remove that record") from None
