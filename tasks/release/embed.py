"""Embedded images: the release's ``images`` table with the bytes of the images its sources let it ship.

``RELEASE_IMAGES`` is ``schemas.IMAGES`` plus ``image`` (the `datasets` Image layout ``{bytes, path}``,
null where not embedded; the Parquet schema carries the `datasets` features, so ``load_dataset``
decodes it to a PIL image) and ``pixels``: ``embedded``, or why not as ``<code>: <detail>``
(``license``: the source's license does not allow redistribution; ``disabled``: ``release.embed_images``
is ``never``; ``missing_file``, ``corrupt``, ``wrong_size``, ... from ``PixelReader``).
Rows without bytes keep their URL and path for ``reasonvqa images fetch``.

``EmbeddedImages`` is a writer ``RowSource``: bytes are read one file's rows at a time
(``ROWS_PER_FILE``), so a large release never holds its images in memory.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas, sources
from reasonvqa.tasks.release.pixels import PixelReader, Pixels, listed_size

EMBEDDED = "embedded"
ROWS_PER_FILE = 500  # 50-250 MB of photos per Parquet file; the writer holds ~7x one file (measured)
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
_DTYPES = {pa.string(): "string", pa.int32(): "int32", pa.bool_(): "bool"}


def _release_images_schema() -> pa.Schema:
    fields = [*schemas.IMAGES, pa.field("image", IMAGE_TYPE), pa.field("pixels", pa.string())]
    features = {f.name: {"_type": "Image"} if f.type == IMAGE_TYPE else {"_type": "Value", "dtype": _DTYPES[f.type]}
                for f in fields}
    return pa.schema(fields, metadata={"huggingface": json.dumps({"info": {"features": features}}, sort_keys=True)})


RELEASE_IMAGES = _release_images_schema()


def release_schema(table: str) -> pa.Schema:
    """The schema a record table has in a release (``images`` carries the embedded bytes)."""
    return RELEASE_IMAGES if table == "images" else schemas.TABLES[table]


def decide(row: dict, mode: str, reader: PixelReader) -> Pixels:
    """Whether one images row is embedded: off, the source's license, then the local bytes."""
    if mode == "never":
        return Pixels(None, "disabled: release.embed_images is never")
    return license_refusal(row) or reader.read(row)


def license_refusal(row: dict) -> Pixels | None:
    """Why an images row's pixels (or a picture drawn on them) may not go into a release; None if they may."""
    try:
        source = sources.source_class(row.get("source") or "")
    except sources.UnknownSourceError:
        return Pixels(None, f"no_source: source {row.get('source')!r} is not installed")
    return None if source.redistributable else Pixels(None, f"license: {source.redistribution}")


class EmbeddedImages:
    """The release's images rows with ``image`` and ``pixels`` filled, read a file's rows at a time."""

    rows_per_file = ROWS_PER_FILE

    def __init__(self, images: pa.Table, reader: PixelReader, mode: str) -> None:
        self.images = schemas.conform(images, schemas.IMAGES)
        self.reader = reader
        self.mode = mode
        self.num_rows = images.num_rows
        self._rows: dict[str, dict] | None = None

    def chunks(self, size: int) -> Iterator[pa.Table]:
        for start in range(0, max(self.num_rows, 1), size):
            part = self.images.slice(start, size)
            decided = [(row, decide(row, self.mode, self.reader)) for row in part.to_pylist()]
            yield with_pixels(part, decided)

    def lookup(self, image_id: str) -> Pixels:
        """The checked bytes of one image for the card's example pictures: a picture drawn on a photo is a
        derivative of it, so only sources whose license allows redistribution give bytes (whatever
        ``release.embed_images`` says)."""
        if self._rows is None:
            self._rows = {row["image_id"]: row for row in self.images.to_pylist()}
        row = self._rows.get(image_id)
        if row is None:
            return Pixels(None, f"no_image: {image_id} is not in the images table")
        return replace(license_refusal(row) or self.reader.read(row), size=listed_size(row))


def with_pixels(part: pa.Table, decided: list[tuple[dict, Pixels]]) -> pa.Table:
    """``part`` (IMAGES rows) with the ``image`` and ``pixels`` columns of the decisions, row by row."""
    images = [{"bytes": p.data, "path": row["file_path"]} if p.data is not None else None for row, p in decided]
    reasons = [EMBEDDED if p.data is not None else p.reason for _, p in decided]
    table = part.append_column("image", pa.array(images, IMAGE_TYPE)).append_column("pixels", pa.array(reasons, pa.string()))
    return table.cast(RELEASE_IMAGES)


def as_release_images(table: pa.Table) -> pa.Table:
    """An images table as RELEASE_IMAGES: one without the columns (read from a release written before
    embedding, or given as plain IMAGES rows) gets no bytes and ``not_embedded`` as the reason."""
    if "pixels" not in table.column_names:
        part = schemas.conform(table, schemas.IMAGES)
        return with_pixels(part, [(row, Pixels(None, "not_embedded: the images table came without image bytes"))
                                  for row in part.select(["file_path"]).to_pylist()])
    return schemas.conform(table, RELEASE_IMAGES)


class ReleaseImages:
    """A release's images table as a writer ``RowSource``, optionally restricted to some image ids: read
    a batch at a time (a re-split never holds the embedded bytes of all its images)."""

    rows_per_file = ROWS_PER_FILE

    def __init__(self, release: Path, keep: pa.Array | None = None) -> None:
        import pyarrow.compute as pc

        self.release = Path(release)
        self.parts = sorted((self.release / "images").glob("*.parquet"))
        self.keep = keep
        ids = pa.concat_arrays([pq.read_table(p, columns=["image_id"])["image_id"].combine_chunks() for p in self.parts]
                               or [pa.array([], pa.string())])
        self.num_rows = len(ids) if keep is None else pc.sum(pc.is_in(ids, value_set=keep)).as_py() or 0

    def restricted(self, image_ids: pa.Array) -> "ReleaseImages":
        """The same table, only the rows of ``image_ids``."""
        return ReleaseImages(self.release, image_ids)

    def batches(self) -> Iterator[pa.Table]:
        import pyarrow.compute as pc

        for part in self.parts:
            for batch in pq.ParquetFile(part).iter_batches(batch_size=64):
                table = pa.Table.from_batches([batch])
                if self.keep is not None:
                    table = table.filter(pc.is_in(table["image_id"], value_set=self.keep))
                if table.num_rows:
                    yield as_release_images(table)

    def chunks(self, size: int) -> Iterator[pa.Table]:
        pending: list[pa.Table] = []
        held = 0
        for table in self.batches():
            pending.append(table)
            held += table.num_rows
            while held >= size:
                merged = pa.concat_tables(pending)
                yield merged.slice(0, size)
                pending, held = [merged.slice(size)], held - size
        if held or not self.num_rows:
            yield pa.concat_tables(pending) if pending else RELEASE_IMAGES.empty_table()

    def lookup(self, image_id: str) -> Pixels:
        """The embedded bytes of one image (the card's example pictures of a re-split)."""
        for part in self.parts:
            rows = pq.read_table(part, filters=[("image_id", "=", image_id)]).to_pylist()
            if rows:
                data, size = (rows[0].get("image") or {}).get("bytes"), listed_size(rows[0])
                return (Pixels(data, size=size) if data is not None
                        else Pixels(None, rows[0].get("pixels") or "not_embedded: no bytes", size))
        return Pixels(None, f"no_image: {image_id} is not in the images table")


def embedded_lookup(images: pa.Table | EmbeddedImages | ReleaseImages | None) -> Callable[[str], Pixels]:
    """image id -> Pixels: read through the sources for a build's EmbeddedImages, the release's bytes for
    ReleaseImages, else the ``image`` column of a table."""
    if isinstance(images, (EmbeddedImages, ReleaseImages)):
        return images.lookup
    found: dict[str, Pixels] = {}
    if images is not None and "image" in images.column_names:
        columns = ["image_id", "image", "pixels", *[c for c in ("width", "height") if c in images.column_names]]
        for row in images.select(columns).to_pylist():
            data, size = (row["image"] or {}).get("bytes"), listed_size(row)
            found[row["image_id"]] = Pixels(data, size=size) if data is not None else Pixels(None, row["pixels"], size)
    return lambda image_id: found.get(image_id, Pixels(None, "not_embedded: the release holds no bytes of this image"))


def images_summary(folder: Path) -> dict:
    """Per source: images, embedded, and the not-embedded ones counted by reason code (the manifest's ``images``)."""
    parts = sorted(Path(folder).glob("*.parquet"))
    table = pa.concat_tables([pq.read_table(p, columns=["source", "pixels"]) for p in parts]) if parts else None
    by_source: dict[str, dict] = {}
    for source, pixels in zip(*(table.column(c).to_pylist() for c in ("source", "pixels"))) if table else ():
        entry = by_source.setdefault(source or "unknown", {"images": 0, "embedded": 0, "not_embedded": Counter()})
        entry["images"] += 1
        if pixels == EMBEDDED:
            entry["embedded"] += 1
        else:
            entry["not_embedded"][(pixels or "unknown").split(":")[0]] += 1
    return {
        "embedded": sum(e["embedded"] for e in by_source.values()),
        "images": sum(e["images"] for e in by_source.values()),
        "by_source": {s: {**e, "not_embedded": dict(sorted(e["not_embedded"].items()))} for s, e in sorted(by_source.items())},
    }
