"""PixelReader: an images row's bytes through its source, or the reason there are none (never an exception)."""

from __future__ import annotations

import io
import tarfile

import pytest
from PIL import Image

from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.sources import parse_config
from reasonvqa.tasks.release.pixels import PixelReader

SA1B_ROW = {"source": "sa1b", "file_path": "sa_000020.tar/sa_226381.jpg", "width": 2000, "height": 1500}


def jpeg(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(buffer, format="JPEG")
    return buffer.getvalue()


@pytest.fixture
def vg_images(tmp_path):
    folder = tmp_path / "vg_images"
    (folder / "VG_100K").mkdir(parents=True)
    (folder / "VG_100K" / "1.jpg").write_bytes(jpeg(64, 48))
    (folder / "VG_100K" / "2.jpg").write_bytes(jpeg(64, 48)[:300])  # cut short
    (folder / "VG_100K" / "3.jpg").write_bytes(b"not an image")
    return folder


def vg_reader(image_dir) -> PixelReader:
    return PixelReader([parse_config({"kind": "vg", "path": SAMPLE_DIR / "vg", "image_dir": image_dir})])


def vg_row(n: int, width: int = 64, height: int = 48) -> dict:
    return {"source": "vg", "file_path": f"VG_100K/{n}.jpg", "width": width, "height": height}


def test_sa1b_streams_the_sample_tar_member():
    pixels = PixelReader([parse_config({"kind": "sa1b", "path": SAMPLE_DIR / "sa1b"})]).read(SA1B_ROW)
    with tarfile.open(SAMPLE_DIR / "sa1b" / "sa_000020.tar") as tar:
        assert pixels.data == tar.extractfile("sa_226381.jpg").read()
    assert pixels.reason is None and Image.open(io.BytesIO(pixels.data)).size == (2000, 1500)


def test_sa1b_member_or_tar_missing_is_a_reason(tmp_path):
    reader = PixelReader([parse_config({"kind": "sa1b", "path": SAMPLE_DIR / "sa1b"})])
    assert reader.read({**SA1B_ROW, "file_path": "sa_000020.tar/sa_1.jpg"}).reason == "missing_file: sa_1.jpg not in sa_000020.tar"
    assert reader.read({**SA1B_ROW, "file_path": "sa_000099.tar/sa_226381.jpg"}).reason.startswith("missing_file: sa_000099.tar")
    cut = tmp_path / "sa_000020.tar"
    cut.write_bytes((SAMPLE_DIR / "sa1b" / "sa_000020.tar").read_bytes()[:20000])  # the jpg's data runs past the end
    broken = PixelReader([parse_config({"kind": "sa1b", "path": tmp_path})]).read(SA1B_ROW)
    assert broken.data is None and broken.reason.startswith("corrupt: sa_000020.tar: tar_truncated")


def test_local_file_is_read_and_checked(vg_images):
    reader = vg_reader(vg_images)
    assert reader.read(vg_row(1)).data == (vg_images / "VG_100K" / "1.jpg").read_bytes()
    assert reader.read(vg_row(1, 800, 600)).reason == "wrong_size: 64x48, the images table lists 800x600"
    assert reader.read(vg_row(2)).reason.startswith("corrupt: OSError")  # truncated: decoding fails, not the reader
    assert reader.read(vg_row(3)).reason.startswith("corrupt: UnidentifiedImageError")


def test_missing_file_gives_a_reason_not_a_crash(vg_images):
    assert vg_reader(vg_images).read(vg_row(9)).reason == "missing_file: VG_100K/9.jpg is not in the source's image folder"
    assert vg_reader(None).read(vg_row(1)).data is None  # no image_dir: looked for under path, where there are none
    escaping = vg_reader(vg_images).read({**vg_row(1), "file_path": "../secret.jpg"})
    assert escaping.reason.startswith("outside_folder")
    assert vg_reader(vg_images).read({**vg_row(1), "file_path": None}).reason.startswith("no_file_path")


def test_unconfigured_source_gives_a_reason(vg_images):
    assert vg_reader(vg_images).read({**SA1B_ROW}).reason == "no_source: source 'sa1b' is not configured here"


def test_droid_keyframe_is_decoded_from_the_sample_video_as_the_same_png_bytes_each_time():
    droid = PixelReader([parse_config({"kind": "droid", "path": SAMPLE_DIR / "droid"})])
    video = "AUTOLab/success/2023-07-07/Fri_Jul__7_09-42-23_2023/recordings/MP4/24400334.mp4"
    row = {"source": "droid", "file_path": f"{video}#t=1.000000", "width": 64, "height": 48}
    first, again, start = droid.read(row), droid.read(row), droid.read({**row, "file_path": f"{video}#t=0.000000"})
    assert first.data == again.data and first.data != start.data  # the frame at 1 s, not the first one
    frame = Image.open(io.BytesIO(first.data))
    assert (frame.format, frame.size) == ("PNG", (64, 48)) and len(set(frame.getdata())) > 10  # a gradient, not blank
    assert droid.read({**row, "file_path": f"{video}#t=99.000000"}).reason == "corrupt: 24400334.mp4: no frame at or after 99.000000 s"
    assert droid.read({**row, "file_path": "x/y.mp4#t=1.000000"}).reason.startswith("missing_file: x/y.mp4")
    assert droid.read({**row, "file_path": video}).reason.startswith("no_file_path")
