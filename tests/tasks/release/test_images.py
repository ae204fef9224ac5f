"""`images fetch` against a local HTTP server: bounded concurrency, resume, checks, `datasets` loading."""

from __future__ import annotations

import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from reasonvqa import schemas
from reasonvqa.tasks.release.images import fetch_images, release_images
from reasonvqa.tasks.release.writer import write_release


def jpeg(width: int, height: int, colour=(200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(buffer, format="JPEG")
    return buffer.getvalue()


class ImageServer:
    """Serves ``files`` (path -> bytes); ``/short/...`` declares more bytes than it sends."""

    def __init__(self, files: dict[str, bytes], delay_s: float = 0.0) -> None:
        server = self
        self.files, self.hits, self.in_flight, self.max_in_flight = files, 0, 0, 0
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                with lock:
                    server.hits += 1
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    time.sleep(delay_s)
                    body = server.files.get(self.path)
                    if body is None:
                        self.send_error(404)
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "image/jpeg")
                    declared = len(body) + 100 if self.path.startswith("/short/") else len(body)
                    self.send_header("Content-Length", str(declared))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    with lock:
                        server.in_flight -= 1

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


def image_row(image_id: str, url: str | None, width: int, height: int) -> dict:
    return {"image_id": image_id, "source": image_id.split(":")[0], "source_image_id": image_id.split(":")[1],
            "width": width, "height": height, "url": url, "file_path": None, "group_id": None, "is_clean": None,
            "visual_domain": "outdoor", "license": "CC BY 4.0", "context": None}


@pytest.fixture
def server():
    files = {f"/img/{i}.jpg": jpeg(40 + i, 30) for i in range(1, 5)}
    served = ImageServer(files, delay_s=0.05)
    yield served
    served.http.shutdown()


@pytest.fixture
def release(tmp_path, splits, server):
    images = schemas.from_rows([image_row("vg:1", f"{server.url}/img/1.jpg", 41, 30),
                                image_row("vg:2", f"{server.url}/img/2.jpg", 42, 30),
                                image_row("gldv2:7e4627eb6f721857", f"{server.url}/img/3.jpg", 43, 30),
                                image_row("vg:9", f"{server.url}/img/4.jpg", 44, 30)], schemas.IMAGES)
    pool = pa.concat_tables(list(splits.values()))
    return write_release(tmp_path / "out", "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                         inputs={"vg": "s1"}, tables={"images": release_images([images], pool)})


def test_release_images_keeps_the_images_questions_show_once_each(splits):
    pool = pa.concat_tables(list(splits.values()))
    rows = [image_row("vg:2", "u2", 1, 1), image_row("vg:1", "u1", 1, 1), image_row("vg:1", "u1", 1, 1),
            image_row("vg:7", "u7", 1, 1)]
    table = release_images([schemas.from_rows(rows[:2], schemas.IMAGES), schemas.from_rows(rows[2:], schemas.IMAGES)], pool)
    assert table["image_id"].to_pylist() == ["vg:1", "vg:2"]  # gldv2 image absent from the rows, vg:7 unused


def test_fetch_downloads_checks_and_embeds_in_the_datasets_image_layout(release, server, tmp_path):
    dest = tmp_path / "images"
    report = fetch_images(release, dest, workers=2)
    assert (report.fetched, report.reused, report.failed) == (3, 0, {})
    assert server.max_in_flight <= 2  # bounded concurrency
    table = pq.read_table(report.table)
    assert table["image_id"].to_pylist() == ["gldv2:7e4627eb6f721857", "vg:1", "vg:2"]
    features = json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]
    assert features["image"] == {"_type": "Image"}

    from datasets import load_dataset

    questions = load_dataset(str(release))  # the card's YAML: default config = the splits
    assert {name: len(split) for name, split in questions.items()} == {"train": 3, "test": 1}
    listed = load_dataset(str(release), "images")["train"]
    assert sorted(listed["image_id"]) == ["gldv2:7e4627eb6f721857", "vg:1", "vg:2"]
    pixels = load_dataset("parquet", data_files=str(dest / "images" / "*.parquet"))["train"]
    sizes = {row["image_id"]: row["image"].size for row in pixels}
    assert sizes == {"gldv2:7e4627eb6f721857": (43, 30), "vg:1": (41, 30), "vg:2": (42, 30)}


def test_fetch_resumes_and_refetches_a_damaged_file(release, server, tmp_path):
    dest = tmp_path / "images"
    fetch_images(release, dest, workers=4)
    hits = server.hits
    again = fetch_images(release, dest, workers=4)
    assert (again.fetched, again.reused, server.hits) == (0, 3, hits)
    ledger = [json.loads(line) for line in (dest / "fetched.jsonl").read_text().splitlines()]
    (dest / ledger[0]["file"]).write_bytes(b"damaged")
    healed = fetch_images(release, dest, workers=4)
    assert (healed.fetched, healed.reused, server.hits) == (1, 2, hits + 1)


def test_every_bad_image_is_reported_with_a_reason(tmp_path, splits, server):
    server.files["/short/1.jpg"] = jpeg(41, 30)
    server.files["/text/2.jpg"] = b"<html>not an image</html>"
    rows = [image_row("vg:1", f"{server.url}/short/1.jpg", 41, 30),
            image_row("vg:2", f"{server.url}/text/2.jpg", 42, 30),
            image_row("gldv2:7e4627eb6f721857", f"{server.url}/img/3.jpg", 99, 99)]
    pool = pa.concat_tables(list(splits.values()))
    release = write_release(tmp_path / "out", "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                            inputs={"vg": "s1"}, tables={"images": schemas.from_rows(rows, schemas.IMAGES)})
    report = fetch_images(release, tmp_path / "images", workers=3, timeout_s=5)
    reasons = {image: reason.split(":")[0] for image, reason in report.failed.items()}
    assert reasons == {"vg:1": "truncated", "vg:2": "not_an_image", "gldv2:7e4627eb6f721857": "wrong_size"}
    assert report.fetched == 0 and pq.read_table(report.table).num_rows == 0


def mixed_release(tmp_path, splits, server, count: int):
    """A release of ``count`` vg images: the even ones embedded from local files, the odd ones only by URL."""
    from reasonvqa.paths import SAMPLE_DIR
    from reasonvqa.sources import parse_config
    from reasonvqa.tasks.release.embed import EmbeddedImages
    from reasonvqa.tasks.release.pixels import PixelReader

    folder = tmp_path / "vg_images" / "VG_100K"
    folder.mkdir(parents=True)
    rows = []
    for i in range(count):
        body = jpeg(20 + i, 16, colour=(i * 5 % 256, 90, 10))
        if i % 2 == 0:
            (folder / f"{i}.jpg").write_bytes(body)
            rows.append({**image_row(f"vg:{i}", None, 20 + i, 16), "file_path": f"VG_100K/{i}.jpg"})
        else:
            server.files[f"/many/{i}.jpg"] = body
            rows.append(image_row(f"vg:{i}", f"{server.url}/many/{i}.jpg", 20 + i, 16))
    reader = PixelReader([parse_config({"kind": "vg", "path": SAMPLE_DIR / "vg", "image_dir": folder.parent})])
    pool = pa.concat_tables(list(splits.values()))
    return write_release(tmp_path / "out", "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                         inputs={"vg": "s1"},
                         tables={"images": EmbeddedImages(schemas.from_rows(rows, schemas.IMAGES), reader, "auto")})


def test_fetch_holds_at_most_one_batch_of_images_and_writes_the_same_rows(tmp_path, splits, server):
    release = mixed_release(tmp_path, splits, server, 40)
    small = fetch_images(release, tmp_path / "small", workers=3, batch=4)
    assert (small.embedded, small.fetched, small.failed) == (20, 20, {})
    assert small.peak_held == 4  # a whole batch read back for its row group, never more
    whole = fetch_images(release, tmp_path / "whole", workers=3, batch=1000)
    assert whole.peak_held == 40  # the counter sees every image when the batch is the release
    in_groups, at_once = pq.ParquetFile(small.table), pq.ParquetFile(whole.table)
    assert (in_groups.metadata.num_row_groups, at_once.metadata.num_row_groups) == (10, 1)
    assert in_groups.read().equals(at_once.read())
    assert in_groups.read()["image_id"].to_pylist() == pq.read_table(release / "images")["image_id"].to_pylist()
    # one batch: the same bytes as one pq.write_table of all the rows (the table before streaming)
    reference = tmp_path / "reference.parquet"
    pq.write_table(at_once.read(), reference, compression="zstd")
    assert whole.table.read_bytes() == reference.read_bytes()
    hits = server.hits
    again = fetch_images(release, tmp_path / "small", workers=3, batch=7)  # resumes with another batch
    assert (again.reused, again.fetched, again.embedded, server.hits) == (40, 0, 0, hits)
    assert again.peak_held == 7 and pq.read_table(again.table).equals(at_once.read())


def test_a_batch_past_the_row_group_byte_limit_is_split_into_row_groups(tmp_path, splits, server, monkeypatch):
    import reasonvqa.tasks.release.images as images

    release = mixed_release(tmp_path, splits, server, 12)
    whole = fetch_images(release, tmp_path / "whole", workers=3, batch=1000)
    largest = max(len(b) for b in pq.read_table(whole.table)["image"].combine_chunks().field("bytes").to_pylist())
    # Arrow's binary offsets end at 2 GiB: a batch whose images pass the limit goes out in several row groups
    monkeypatch.setattr(images, "MAX_ROW_GROUP_BYTES", 3 * largest)
    split = fetch_images(release, tmp_path / "split", workers=3, batch=1000)
    parquet = pq.ParquetFile(split.table)
    group_bytes = [sum(len(b) for b in parquet.read_row_group(i)["image"].combine_chunks().field("bytes").to_pylist())
                   for i in range(parquet.metadata.num_row_groups)]
    assert len(group_bytes) >= 4 and max(group_bytes) <= 3 * largest and parquet.metadata.num_rows == 12
    assert pq.read_table(split.table).equals(pq.read_table(whole.table))
