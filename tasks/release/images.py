"""Images of a release: the table of the images its questions show, and fetching them by URL.

A release embeds the bytes of an image only where its source's license allows it
(``tasks/release/embed.py``); the ``images`` table names every image's URL, size and license.
``fetch_images`` takes the embedded ones from the release and downloads the others with bounded
concurrency, checks each against the table (the Content-Length, a
decodable image of the listed width and height) and records each file's sha256 in a ledger, so a
rerun resumes: files whose recorded hash still matches are kept, the rest are fetched again. It
writes the images as Parquet in the `datasets` Image feature layout (``{bytes, path}``), loadable
with ``datasets.load_dataset("parquet", ...)`` beside the release's questions. It streams a batch of
rows at a time (one row group each), so memory holds at most a batch of images (``Held`` counts them).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.tasks.release.embed import ROWS_PER_FILE
from reasonvqa.tasks.release.pixels import check_image

IMAGES_TABLE = "images"
LEDGER = "fetched.jsonl"
FILES = "files"
# Images held in memory at once by ``fetch_images``: one release file's rows (embed.ROWS_PER_FILE), so
# a batch never spans two files and each release file becomes one row group of the fetched table.
BATCH = ROWS_PER_FILE
USER_AGENT = "reasonvqa-pipeline images fetch (https://github.com/reasonvqa/reasonvqa-pipeline)"
# The `datasets` features of the fetched table: `image` decodes to a PIL image.
FETCHED_FEATURES = {
    "image_id": {"dtype": "string", "_type": "Value"},
    "url": {"dtype": "string", "_type": "Value"},
    "license": {"dtype": "string", "_type": "Value"},
    "sha256": {"dtype": "string", "_type": "Value"},
    "image": {"_type": "Image"},
}
FETCHED = pa.schema([("image_id", pa.string()), ("url", pa.string()), ("license", pa.string()),
                     ("sha256", pa.string()),
                     ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())]))])


def release_images(tables: Iterable[pa.Table], pool: pa.Table) -> pa.Table:
    """The IMAGES rows of the images the ``pool``'s questions show, one per image, by image id."""
    images = pa.concat_tables([schemas.conform(t, schemas.IMAGES) for t in tables]) if tables else schemas.IMAGES.empty_table()
    used = pc.unique(pool["image_id"])
    images = images.filter(pc.is_in(images["image_id"], value_set=used)).sort_by([("image_id", "ascending")])
    if images.num_rows:  # the same image read twice (a source listing it twice) is kept once
        keep = pc.equal(images["image_id"].slice(1), images["image_id"].slice(0, images.num_rows - 1))
        images = images.filter(pa.concat_arrays([pa.array([True]), pc.invert(keep).combine_chunks()]))
    return images


@dataclass
class FetchReport:
    """What ``fetch_images`` did: counts, bytes, seconds and one reason per image it could not fetch."""

    fetched: int = 0
    reused: int = 0
    embedded: int = 0  # taken from the release's own images table, not downloaded
    bytes: int = 0
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)
    table: Path | None = None
    peak_held: int = 0  # the most images whose bytes were in memory at once (at most the batch)


class _Ledger:
    """``fetched.jsonl``: one JSON line per file fetched and checked (the last line of an image wins)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.entries: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    self.entries[entry["image_id"]] = entry
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by an interrupted run: that image is fetched again

    def add(self, entry: dict) -> None:
        with self.lock:
            self.entries[entry["image_id"]] = entry
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry, sort_keys=True) + "\n")


def count_release_images(release: Path) -> int:
    """How many rows the release's ``images`` table has, from the Parquet footers (no bytes read)."""
    return sum(pq.ParquetFile(part).metadata.num_rows for part in _release_image_parts(Path(release)))


class Held:
    """How many images' bytes ``fetch_images`` holds in memory now, and the most it held at once.

    Every body taken in (an embedded image read from the release, a download, a file read back for
    the table) is counted until it is let go, so ``peak`` is the bound the batch promises, measured.
    """

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self._lock = threading.Lock()

    def take(self, count: int = 1) -> None:
        with self._lock:
            self.now += count
            self.peak = max(self.peak, self.now)

    def drop(self, count: int = 1) -> None:
        with self._lock:
            self.now -= count


def fetch_images(release: Path, dest: Path, *, workers: int = 8, timeout_s: float = 30.0, batch: int = BATCH,
                 on_progress: Callable[[int], None] | None = None) -> FetchReport:
    """Download the release's images into ``dest`` (resuming), writing ``dest/images/part-00000.parquet``.

    The release's rows are taken ``batch`` at a time (never across two of its files): the batch's
    embedded images are saved, the others downloaded (at most ``workers`` at once), then the batch is
    appended to the table as one row group, so at most ``batch`` images are held in memory at once
    (``FetchReport.peak_held``). Every image is accounted for: fetched, taken from the release,
    reused from a previous run (its file's sha256 still matches the ledger) or listed in ``failed``.
    """
    started = time.perf_counter()
    parts = _release_image_parts(Path(release))
    dest = Path(dest)
    (dest / FILES).mkdir(parents=True, exist_ok=True)
    ledger = _Ledger(dest / LEDGER)
    report = FetchReport()
    held = Held()
    count_lock = threading.Lock()

    def one(row: dict, embedded: dict[str, bytes]) -> None:
        image_id = row["image_id"]
        body = embedded.pop(image_id, None)
        try:
            entry = ledger.entries.get(image_id)
            if entry and _file_matches(dest / entry["file"], entry["sha256"]):
                with count_lock:
                    report.reused += 1
            elif body is not None:
                _check_image(body, row, f"the release's embedded {image_id}")
                ledger.add(_save(row, body, dest, row["url"] or row["file_path"] or image_id))
                with count_lock:
                    report.embedded += 1
            else:
                entry = _download(row, dest, timeout_s, held)
                ledger.add(entry)
                with count_lock:
                    report.fetched += 1
                    report.bytes += entry["bytes"]
        except FetchError as error:
            with count_lock:
                report.failed[image_id] = str(error)
        finally:
            if body is not None:
                del body
                held.drop()
        if on_progress is not None:
            on_progress(1)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool, _FetchedWriter(dest) as writer:
        for rows, embedded in _release_batches(parts, max(1, batch), held):
            list(pool.map(lambda row: one(row, embedded), rows))  # noqa: B023 (run to the end within this pass)
            writer.write(rows, ledger, dest, report.failed, held)
    report.table = writer.path
    report.peak_held = held.peak
    report.seconds = time.perf_counter() - started
    return report


def _release_image_parts(release: Path) -> list[Path]:
    parts = sorted((release / IMAGES_TABLE).glob("*.parquet"))
    if not parts:
        raise FileNotFoundError(f"{release / IMAGES_TABLE}: no Parquet files")
    return parts


def _release_batches(parts: list[Path], batch: int, held: Held) -> Iterator[tuple[list[dict], dict[str, bytes]]]:
    """The release's images rows ``batch`` at a time, each with the bytes the release embeds for them."""
    for part in parts:
        handle = pq.ParquetFile(part)
        with_bytes = "image" in handle.schema_arrow.names
        columns = [*schemas.IMAGES.names, "image"] if with_bytes else None
        for record in handle.iter_batches(batch_size=batch, columns=columns):
            embedded: dict[str, bytes] = {}
            if with_bytes:
                for image_id, image in zip(record.column("image_id").to_pylist(), record.column("image").to_pylist()):
                    if image is not None and image["bytes"] is not None:
                        embedded[image_id] = image["bytes"]
                held.take(len(embedded))
            rows = schemas.conform(pa.Table.from_batches([record]), schemas.IMAGES).to_pylist()
            del record
            yield rows, embedded
            held.drop(len(embedded))  # embedded rows the fetch did not use (a reused file, a failure)
            embedded.clear()


class FetchError(RuntimeError):
    """One image could not be fetched or failed its checks."""


def _file_matches(path: Path, sha256: str) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest() == sha256


def _download(row: dict, dest: Path, timeout_s: float, held: Held) -> dict:
    url = row["url"]
    if not url:
        raise FetchError("no_url: the source gives no URL for this image")
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            body = answer.read()
            declared = answer.headers.get("Content-Length")
    except urllib.error.HTTPError as error:
        raise FetchError(f"http_{error.code}: {url}") from None
    except http.client.IncompleteRead as error:  # the connection closed before Content-Length bytes came
        raise FetchError(f"truncated: {url}: {len(error.partial)} of {len(error.partial) + (error.expected or 0)} bytes") from None
    except http.client.HTTPException as error:
        raise FetchError(f"bad_response: {url}: {type(error).__name__}") from None
    except (urllib.error.URLError, OSError) as error:
        raise FetchError(f"unreachable: {url}: {getattr(error, 'reason', error)}") from None
    held.take()
    try:
        if declared is not None and declared.isdigit() and int(declared) != len(body):
            raise FetchError(f"truncated: {url}: {len(body)} of {declared} bytes")
        _check_image(body, row, url)
        return _save(row, body, dest, url)
    finally:
        del body
        held.drop()


def _save(row: dict, body: bytes, dest: Path, url: str) -> dict:
    """Write one checked image under ``dest/files`` (atomically) and return its ledger entry."""
    digest = hashlib.sha256(body).hexdigest()
    name = f"{FILES}/{hashlib.sha256(row['image_id'].encode()).hexdigest()[:24]}{_suffix(url)}"
    part = dest / f"{name}.part"
    part.write_bytes(body)
    os.replace(part, dest / name)
    return {"image_id": row["image_id"], "file": name, "sha256": digest, "bytes": len(body), "url": url}


def _check_image(body: bytes, row: dict, url: str) -> None:
    """The body must decode as an image of the width and height the release lists (when it lists them)."""
    problem = check_image(body, row.get("width"), row.get("height"))
    if problem:
        code, _, detail = problem.partition(": ")
        raise FetchError(f"{'not_an_image' if code == 'corrupt' else code}: {url}: {detail}")


def _suffix(url: str) -> str:
    suffix = Path(urllib.parse.urlsplit(url).path).suffix.lower()
    return suffix if suffix in {".jpg", ".jpeg", ".png", ".webp", ".gif"} else ".jpg"


MAX_ROW_GROUP_BYTES = 1 << 30  # a binary column's int32 offsets end at 2 GiB; a batch of big images is split


def _byte_chunks(kept: list[tuple[dict, dict]], limit: int) -> Iterator[list[tuple[dict, dict]]]:
    """``kept`` (row, ledger entry) in order, cut where the images' bytes would pass ``limit``."""
    chunk: list[tuple[dict, dict]] = []
    size = 0
    for item in kept:
        if chunk and size + item[1]["bytes"] > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item[1]["bytes"]
    if chunk:
        yield chunk


class _FetchedWriter:
    """``dest/images/part-00000.parquet`` in the `datasets` Image layout, one row group per batch.

    Written to a ``.part`` file and moved into place when complete; a release whose images fit in
    one batch gets the same bytes as a single ``pq.write_table`` of all its rows.
    """

    def __init__(self, dest: Path) -> None:
        folder = dest / IMAGES_TABLE
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "part-00000.parquet"
        self.part = folder / "part-00000.parquet.part"
        self.schema = FETCHED.with_metadata({"huggingface": json.dumps({"info": {"features": FETCHED_FEATURES}})})
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0

    def __enter__(self) -> "_FetchedWriter":
        self.writer = pq.ParquetWriter(self.part, self.schema, compression="zstd")
        return self

    def write(self, rows: list[dict], ledger: _Ledger, dest: Path, failed: dict[str, str], held: Held) -> None:
        """Append the batch's fetched images (rows in release order), their bytes read back from ``dest``
        into one Arrow buffer (no Python copy of each image beside it)."""
        kept = [(row, ledger.entries[row["image_id"]]) for row in rows
                if row["image_id"] in ledger.entries and row["image_id"] not in failed]
        for chunk in _byte_chunks(kept, MAX_ROW_GROUP_BYTES):
            self._write_chunk(chunk, dest, held)

    def _write_chunk(self, kept: list[tuple[dict, dict]], dest: Path, held: Held) -> None:
        """One row group of images whose bytes add up to less than Arrow's 2 GiB binary offsets."""
        offsets = [0]
        for _, entry in kept:
            offsets.append(offsets[-1] + entry["bytes"])
        held.take(len(kept))
        try:
            data = bytearray(offsets[-1])  # each file read straight into its place: one copy of the batch
            view = memoryview(data)
            for (_, entry), start, end in zip(kept, offsets, offsets[1:]):
                with (dest / entry["file"]).open("rb") as handle:
                    if handle.readinto(view[start:end]) != end - start or handle.read(1):
                        raise RuntimeError(f"{dest / entry['file']}: not the {end - start} bytes its ledger entry says")
            del view
            images = pa.Array.from_buffers(pa.binary(), len(kept), [None, pa.array(offsets, pa.int32()).buffers()[1],
                                                                     pa.py_buffer(data)])
            paths = pa.array([Path(entry["file"]).name for _, entry in kept], pa.string())
            columns = {"image_id": [r["image_id"] for r, _ in kept], "url": [r["url"] for r, _ in kept],
                       "license": [r["license"] for r, _ in kept], "sha256": [e["sha256"] for _, e in kept]}
            table = pa.Table.from_arrays(
                [*(pa.array(v, pa.string()) for v in columns.values()),
                 pa.StructArray.from_arrays([images, paths], fields=list(self.schema.field("image").type))],
                schema=self.schema)
            del images, data
            assert self.writer is not None  # opened by __enter__
            self.writer.write_table(table)
            self.rows += len(kept)
        finally:
            held.drop(len(kept))

    def __exit__(self, kind, error, trace) -> None:
        assert self.writer is not None  # opened by __enter__
        if error is None and self.rows == 0:  # an empty table, as pq.write_table writes one
            self.writer.write_table(self.schema.empty_table())
        self.writer.close()
        if error is None:
            os.replace(self.part, self.path)
