"""Image size from a JPEG's frame header (SOF marker), reading only the bytes before it.

A JPEG is a sequence of marker segments ``FF xx <2-byte length> <payload>``; the frame
header (SOF0..SOF15 except DHT C4, JPG C8 and DAC CC) holds precision, height and width.
EXIF/XMP segments before it can be up to 64 KiB each, so the reader pulls chunks until the
SOF is found instead of assuming a fixed header length.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}  # RSTn and TEM carry no length
_CHUNK = 4096
_MAX_HEADER = 1 << 20  # give up on a header that has not reached its SOF within 1 MiB


class JpegHeaderError(ValueError):
    """Bytes that are not a JPEG, or a JPEG whose frame header cannot be found."""


def jpeg_size(stream: BinaryIO) -> tuple[int, int]:
    """Return ``(width, height)`` from the SOF segment of the JPEG read from ``stream``."""
    data = stream.read(_CHUNK)
    if data[:2] != b"\xff\xd8":
        raise JpegHeaderError("not a JPEG (no SOI marker)")
    pos = 2
    while True:
        while len(data) < pos + 9:  # marker (2) + length (2) + precision (1) + height, width (4)
            more = stream.read(_CHUNK)
            if not more:
                raise JpegHeaderError("JPEG ends before its frame header")
            data += more
        if data[pos] != 0xFF:
            raise JpegHeaderError(f"JPEG marker expected at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte before a marker
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker in (0xD9, 0xDA):
            raise JpegHeaderError("JPEG reaches its scan data or end without a frame header")
        (length,) = struct.unpack_from(">H", data, pos + 2)
        if marker in _SOF_MARKERS:
            height, width = struct.unpack_from(">HH", data, pos + 5)
            if width == 0 or height == 0:
                raise JpegHeaderError(f"JPEG frame header gives size {width}x{height}")
            return width, height
        if length < 2:
            raise JpegHeaderError(f"JPEG segment length {length} at byte {pos}")
        pos += 2 + length
        if pos > _MAX_HEADER:
            raise JpegHeaderError("no JPEG frame header within the first 1 MiB")
