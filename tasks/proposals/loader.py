"""The proposals stage's image loader: file digests, decoding and the detector's resize in worker
threads, a batch ahead of the models, so the device does not wait for them.

Each image is read and digested (the call cache's key), decoded to RGB and, when readable, turned
into the detector's input tensor; an unreadable one carries the error its reject names. Batches
come out in the shard's order, whatever order the threads finish in.
"""

from __future__ import annotations

import hashlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generator, Sequence

LOADER_THREADS = 2  # decoding and resizing release the GIL (PIL, torch); two keep ahead of the models' ~50 ms per image
BATCHES_AHEAD = 1


@dataclass(frozen=True)
class ImageItem:
    """One image to propose regions for: id, file, declared labels."""

    image_id: str
    path: Path
    source: str  # file path as the IMAGES row names it (reject locations)
    labels: tuple[str, ...]


@dataclass(frozen=True)
class LoadedImage:
    """An image as the models take it: its file's sha256 (None when unreadable), the RGB picture, its
    pixels (``(H, W, 3)`` uint8, SAM's input) and the detector's input tensor, or the one-line error
    that made it unreadable."""

    item: ImageItem
    digest: str | None
    image: Any = None  # PIL.Image.Image in RGB
    pixels: Any = None
    detector_input: Any = None
    error: str | None = None


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_image(item: ImageItem, transform: Callable[[Any], Any] | None) -> LoadedImage:
    """``item`` read, digested, decoded and (when ``transform`` is given) transformed for the detector."""
    from PIL import Image

    try:
        digest: str | None = file_digest(item.path)
    except OSError:
        digest = None
    try:
        with Image.open(item.path) as opened:
            image = opened.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        return LoadedImage(item, digest, error=f"{type(error).__name__}: {error}")
    import numpy as np

    return LoadedImage(item, digest, image, np.asarray(image), transform(image) if transform else None)


def prefetched_batches(items: Sequence[ImageItem], per_batch: int,
                       transform: Callable[[Any], Any] | None) -> Generator[list[LoadedImage], None, None]:
    """``items`` in batches of ``per_batch``, loaded by ``LOADER_THREADS`` threads while the caller works
    on the batch before (``BATCHES_AHEAD`` batches ahead)."""
    batches = [items[start : start + per_batch] for start in range(0, len(items), per_batch)]
    pool = ThreadPoolExecutor(LOADER_THREADS, thread_name_prefix="proposals-loader")
    pending: deque[list[Future[LoadedImage]]] = deque()
    try:
        for batch in batches:
            pending.append([pool.submit(load_image, item, transform) for item in batch])
            if len(pending) > BATCHES_AHEAD:
                yield [future.result() for future in pending.popleft()]
        while pending:
            yield [future.result() for future in pending.popleft()]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
