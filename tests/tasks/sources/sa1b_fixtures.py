"""Build SA-1B-format tar shards for tests: real annotation JSON, synthetic JPEGs, crafted bad members."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from PIL import Image

from reasonvqa.paths import SAMPLE_DIR

SAMPLE_TAR = SAMPLE_DIR / "sa1b" / "sa_000020.tar"


def jpeg_bytes(width: int, height: int, **save_options) -> bytes:
    """A real (solid grey) JPEG of the given size."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (120, 130, 140)).save(buffer, format="JPEG", quality=50, **save_options)
    return buffer.getvalue()


def real_annotation_doc() -> dict:
    """The real SA-1B JSON of image 226381 (first 12 annotations) from the bundled sample tar."""
    with tarfile.open(SAMPLE_TAR) as archive:
        return json.loads(archive.extractfile("sa_226381.json").read())


def add_file(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    archive.addfile(info, io.BytesIO(data))


def add_special(archive: tarfile.TarFile, name: str, kind: bytes, linkname: str = "") -> None:
    """A non-regular member: tarfile.SYMTYPE, LNKTYPE, CHRTYPE, BLKTYPE, FIFOTYPE or DIRTYPE."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.mtime = 0
    archive.addfile(info)


def image_pair(image_id: int, doc: dict, jpeg_size: tuple[int, int] | None = None) -> list[tuple[str, bytes]]:
    """The jpg + json members of one image; the JPEG has the JSON's size unless ``jpeg_size`` says otherwise."""
    doc = json.loads(json.dumps(doc))
    doc["image"] = {**doc["image"], "image_id": image_id, "file_name": f"sa_{image_id}.jpg"}
    width, height = jpeg_size or (doc["image"]["width"], doc["image"]["height"])
    return [(f"sa_{image_id}.jpg", jpeg_bytes(width, height)), (f"sa_{image_id}.json", json.dumps(doc).encode())]


def write_tar(path: Path, members: list[tuple[str, bytes]]) -> Path:
    """A tar of regular members, in the given order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as archive:
        for name, data in members:
            add_file(archive, name, data)
    return path
