"""``reasonvqa verify`` on a release's ``images`` table, read file by file (it may hold the images' bytes):
each row is embedded or says why not, embedded bytes decode to the listed size and come from a source
whose license allows it, and the manifest's ``images`` summary is what the table holds. A table written
before embedding (``schemas.IMAGES``, no ``pixels``) has no rows to check and no summary."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas, sources
from reasonvqa.tasks.release.embed import EMBEDDED, RELEASE_IMAGES, images_summary
from reasonvqa.tasks.release.pixels import check_image

COLUMNS = ["image_id", "source", "width", "height", "image", "pixels"]


def check_images(release: Path, manifest: dict) -> list[str]:
    """Problems of ``release/images/*.parquet`` (RELEASE_IMAGES, or legacy IMAGES) and of the manifest's summary."""
    parts = sorted((release / "images").glob("*.parquet"))
    if not parts:
        return ["images: no Parquet files"]
    problems, legacy = [], 0
    for part in parts:
        name = part.relative_to(release)
        try:
            schema = pq.read_schema(part)
            if schema.equals(schemas.IMAGES, check_metadata=False):
                legacy += 1
                continue
            if not schema.equals(RELEASE_IMAGES, check_metadata=False):
                problems.append(f"{name}: schema differs from the release images table {schemas.SCHEMA_VERSION}")
                continue
            for batch in pq.ParquetFile(part).iter_batches(batch_size=64, columns=COLUMNS):
                problems += [p for row in batch.to_pylist() for p in _check_row(row)]
        except (pa.ArrowInvalid, OSError) as exc:
            problems.append(f"{name}: unreadable Parquet ({exc})")
    if legacy and legacy < len(parts):
        problems.append("images: some files have the pixels columns and some do not")
    expected = images_summary(release / "images") if not legacy and not problems else manifest.get("images")
    if manifest.get("images") != expected:
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
