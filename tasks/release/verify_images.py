"""``reasonvqa verify`` on a release's ``images`` table: each row is embedded or says why not, embedded
bytes decode to the listed size and come from a source whose license allows it, and the manifest's
``images`` summary is what the table holds."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from reasonvqa import sources
from reasonvqa.tasks.release.embed import EMBEDDED, images_summary
from reasonvqa.tasks.release.pixels import check_image


def check_images(images: pa.Table, release: Path, manifest: dict) -> list[str]:
    """Problems of the images table (RELEASE_IMAGES) and of the manifest's summary of it."""
    problems = []
    for batch in images.select(["image_id", "source", "width", "height", "image", "pixels"]).to_batches(256):
        for row in batch.to_pylist():
            problems += _check_row(row)
    if manifest.get("images") != images_summary(release / "images"):
        problems.append("manifest.json: its images summary differs from the images table")
    return problems


def _check_row(row: dict) -> list[str]:
    image_id, pixels = row["image_id"], row["pixels"]
    data = (row["image"] or {}).get("bytes")
    if pixels is None:
        return [f"images: {image_id}: no pixels value (embedded, or why not)"]
    if (pixels == EMBEDDED) != (data is not None):
        return [f"images: {image_id}: pixels is {pixels!r} but the image bytes are {'present' if data else 'absent'}"]
    if data is None:
        return []
    try:
        if not sources.source_class(row["source"]).redistributable:
            return [f"images: {image_id}: embedded, but source {row['source']} does not allow redistribution"]
    except sources.UnknownSourceError:
        pass  # a plugin source not installed here: its declaration cannot be checked
    problem = check_image(data, row["width"], row["height"])
    return [f"images: {image_id}: embedded image {problem}"] if problem else []
