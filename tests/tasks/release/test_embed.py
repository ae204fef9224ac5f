"""Embedded images: bytes in the release's images table where the source's license allows, the reason elsewhere."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from reasonvqa import schemas
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.sources import parse_config
from reasonvqa.tasks.release.embed import EmbeddedImages, RELEASE_IMAGES, embedded_lookup
from reasonvqa.tasks.release.pixels import PixelReader
from reasonvqa.tasks.release.verify import verify_release
from reasonvqa.tasks.release.verify_images import _check_row
from reasonvqa.tasks.release.writer import write_release


def image_row(image_id: str, file_path: str, width: int, height: int) -> dict:
    source, native = image_id.split(":")
    return {"image_id": image_id, "source": source, "source_image_id": native, "width": width, "height": height,
            "url": None, "file_path": file_path, "license": "CC BY 4.0"}


IMAGES = schemas.from_rows([
    image_row("gldv2:7e4627eb6f721857", "train/7/e/4/7e4627eb6f721857.jpg", None, None),
    image_row("sa1b:226381", "sa_000020.tar/sa_226381.jpg", 2000, 1500),
    image_row("vg:1", "VG_100K/1.jpg", 64, 48),
    image_row("vg:2", "VG_100K/2.jpg", 64, 48),
], schemas.IMAGES)


@pytest.fixture
def reader(tmp_path) -> PixelReader:
    folder = tmp_path / "vg_images" / "VG_100K"
    folder.mkdir(parents=True)
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buffer, format="JPEG")
    (folder / "1.jpg").write_bytes(buffer.getvalue())  # vg:2 has no file
    return PixelReader([parse_config({"kind": "vg", "path": SAMPLE_DIR / "vg", "image_dir": folder.parent}),
                        parse_config({"kind": "gldv2", "path": SAMPLE_DIR / "gldv2", "image_dir": folder.parent}),
                        parse_config({"kind": "sa1b", "path": SAMPLE_DIR / "sa1b"})])


def release(tmp_path, splits, reader, mode: str, name: str = "out"):
    pool = pa.concat_tables(list(splits.values()))
    return write_release(tmp_path / name, "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                         inputs={"vg": "s1"}, tables={"images": EmbeddedImages(IMAGES, reader, mode)})


def test_embeds_only_licensed_local_images_and_datasets_decodes_them(tmp_path, splits, reader):
    path = release(tmp_path, splits, reader, "auto")
    table = pq.read_table(path / "images" / "part-00000.parquet")
    assert table.schema.equals(RELEASE_IMAGES, check_metadata=False)
    assert dict(zip(table["image_id"].to_pylist(), table["pixels"].to_pylist())) == {
        "gldv2:7e4627eb6f721857": "license: each GLDv2 image has its own license and attribution (train_attribution.csv), "
                                  "which the release does not carry: fetch by URL",
        "sa1b:226381": "license: the SA-1B Dataset Research License does not allow redistributing its images",
        "vg:1": "embedded",
        "vg:2": "missing_file: VG_100K/2.jpg is not in the source's image folder"}
    from datasets import load_dataset

    images = load_dataset(str(path), "images", cache_dir=str(tmp_path / "hf"))["train"]  # no stale cache of another "1.0.0"
    decoded = {row["image_id"]: row["image"] for row in images}
    assert decoded["vg:1"].size == (64, 48) and decoded["vg:1"].getpixel((5, 5))[1] > 150
    assert decoded["sa1b:226381"] is None and decoded["vg:2"] is None
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["images"]["embedded"] == 1 and manifest["images"]["by_source"]["vg"] == {
        "images": 2, "embedded": 1, "not_embedded": {"missing_file": 1}}
    card = (path / "README.md").read_text()
    assert "| `vg` | 2 | 1 | 1 no local file (give the source an `image_dir`) |" in card
    assert "| `sa1b` | 1 | 0 | 1 license: the SA-1B Dataset Research License" in card
    assert verify_release(path) == []


def test_embedded_release_is_byte_identical_and_never_embeds_nothing(tmp_path, splits, reader):
    first, second = release(tmp_path, splits, reader, "auto", "a"), release(tmp_path, splits, reader, "auto", "b")
    assert (first / "manifest.json").read_bytes() == (second / "manifest.json").read_bytes()
    never = release(tmp_path, splits, reader, "never", "c")
    pixels = pq.read_table(never / "images" / "part-00000.parquet", columns=["pixels"])["pixels"].to_pylist()
    assert pixels == ["disabled: release.embed_images is never"] * 4 and verify_release(never) == []


def test_lookup_gives_card_photos_of_redistributable_sources_and_embedded_bytes_of_a_release(tmp_path, splits, reader):
    embedded = EmbeddedImages(IMAGES, reader, "never")
    assert embedded.lookup("vg:1").data is not None  # the card's pictures do not depend on embed_images
    assert embedded.lookup("sa1b:226381").reason.startswith("license:")  # a picture on it would be a derivative
    assert embedded.lookup("vg:9").reason.startswith("no_image")
    table = pq.read_table(release(tmp_path, splits, reader, "auto") / "images" / "part-00000.parquet")
    from_release = embedded_lookup(table)
    assert from_release("vg:1").data is not None and from_release("sa1b:226381").reason.startswith("license")


def test_verify_refuses_rows_whose_bytes_and_pixels_disagree_or_break_a_license():
    row = {"image_id": "vg:1", "source": "vg", "width": 64, "height": 48, "image": None, "pixels": "embedded"}
    assert _check_row(row) == ["images: vg:1: pixels is 'embedded' but the image bytes are absent"]
    png = io.BytesIO()
    Image.new("RGB", (64, 48)).save(png, format="PNG")
    licensed = {**row, "source": "sa1b", "image": {"bytes": png.getvalue(), "path": "x"}}
    assert _check_row(licensed) == ["images: vg:1: embedded, but source sa1b does not allow redistribution"]
    assert _check_row({**row, "image": {"bytes": b"junk", "path": "x"}})[0].startswith("images: vg:1: embedded image corrupt")


def test_images_fetch_takes_embedded_images_from_the_release(tmp_path, splits, reader):
    from reasonvqa.tasks.release.images import fetch_images

    report = fetch_images(release(tmp_path, splits, reader, "auto"), tmp_path / "fetched", workers=2)
    assert report.embedded == 1 and report.fetched == 0  # no URL anywhere: nothing downloaded
    assert sorted(report.failed) == ["gldv2:7e4627eb6f721857", "sa1b:226381", "vg:2"]
    fetched = pq.read_table(report.table)
    assert fetched["image_id"].to_pylist() == ["vg:1"]
    assert Image.open(io.BytesIO(fetched["image"][0]["bytes"].as_py())).size == (64, 48)


def test_droid_keyframes_are_embedded_as_png_and_decode_to_their_size(tmp_path, splits):
    from datasets import load_dataset

    from reasonvqa.tasks.sources.droid import DroidSource

    source, config = DroidSource(), parse_config({"kind": "droid", "path": SAMPLE_DIR / "droid"})
    frames = next(iter(source.read(config, source.plan(config, 10)[0], 10))).outputs["images"]
    pool = pa.concat_tables(list(splits.values()))
    path = write_release(tmp_path / "out", "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                         inputs={"droid": "s1"}, tables={"images": EmbeddedImages(frames, PixelReader([config]), "auto")})
    images = load_dataset(str(path), "images", cache_dir=str(tmp_path / "hf"))["train"]
    assert len(images) == frames.num_rows == 6 and set(images["pixels"]) == {"embedded"}
    assert {row["image"].size for row in images} == {(64, 48)} and verify_release(path) == []


def test_release_images_streams_a_releases_table_restricted_to_some_images(tmp_path, splits, reader):
    from reasonvqa.tasks.release.embed import ReleaseImages

    path = release(tmp_path, splits, reader, "auto")
    whole = pq.read_table(path / "images" / "part-00000.parquet")
    kept = ReleaseImages(path).restricted(pa.array(["vg:1", "sa1b:226381", "vg:7"]))
    assert kept.num_rows == 2 and ReleaseImages(path).num_rows == 4
    chunks = list(kept.chunks(1))
    assert [c["image_id"].to_pylist() for c in chunks] == [["sa1b:226381"], ["vg:1"]]
    assert pa.concat_tables(chunks).equals(whole.filter(pa.compute.is_in(whole["image_id"], pa.array(["vg:1", "sa1b:226381"]))))
    embedded = whole["image"][2].as_py()["bytes"]  # rows by image id: gldv2, sa1b, vg:1, vg:2
    assert embedded is not None and kept.lookup("vg:1").data == embedded
    assert kept.lookup("sa1b:226381").reason.startswith("license:") and kept.lookup("vg:9").reason.startswith("no_image")
    assert list(ReleaseImages(path).restricted(pa.array(["vg:9"])).chunks(500))[0].num_rows == 0
