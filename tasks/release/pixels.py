"""An image's pixels for a release: its bytes read locally through its source, checked to decode.

``PixelReader.read(row)`` asks the row's source (``reasonvqa.sources``: ``Source.image_bytes``) for
the bytes of an ``images`` row and checks that they decode to the width and height the row lists.
It never raises for a bad image: a missing file, an unreadable or corrupt one, one of the wrong
size or a source not configured here comes back as ``Pixels(None, "<code>: <detail>")``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Iterable

from reasonvqa import sources
from reasonvqa.sources import ImageUnavailable, SourceConfig


@dataclass(frozen=True)
class Pixels:
    """An image's encoded bytes, or None and the reason (``<code>: <detail>``) there are none; ``size``: the
    (width, height) the images table lists, where a lookup knows it (the card's pictures are drawn at it)."""

    data: bytes | None
    reason: str | None = None
    size: tuple[int, int] | None = None


def listed_size(row: dict) -> tuple[int, int] | None:
    """The (width, height) an images row lists, None when either is missing."""
    width, height = row.get("width"), row.get("height")
    return (int(width), int(height)) if width and height else None


class PixelReader:
    """Reads images rows' bytes through their sources, one config per source kind."""

    def __init__(self, configs: Iterable[SourceConfig]) -> None:
        self.configs = {config.kind: config for config in configs}

    def read(self, row: dict) -> Pixels:
        """The checked bytes of one ``images`` row (source, file_path, width, height)."""
        kind = row.get("source") or ""
        config = self.configs.get(kind)
        if config is None:
            return Pixels(None, f"no_source: source {kind!r} is not configured here")
        try:
            data = sources.get(kind).image_bytes(config, row.get("file_path") or "")
        except sources.UnknownSourceError:
            return Pixels(None, f"no_source: source {kind!r} is not installed")
        except ImageUnavailable as unavailable:
            return Pixels(None, str(unavailable))
        problem = check_image(data, row.get("width"), row.get("height"))
        return Pixels(None, problem) if problem else Pixels(data)


def check_image(data: bytes, width: int | None, height: int | None) -> str | None:
    """None when ``data`` decodes as a whole image of ``width`` x ``height`` (when given), else why not."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            size = image.size
            # JPEG: decode at 1/8 scale (every byte of the scan is still read, so truncation shows)
            image.draft("RGB", (max(1, size[0] // 8), max(1, size[1] // 8)))
            image.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        return f"corrupt: {type(error).__name__}: {error}"
    if width and height and size != (width, height):
        return f"wrong_size: {size[0]}x{size[1]}, the images table lists {width}x{height}"
    return None
