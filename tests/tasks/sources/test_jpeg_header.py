import io

import pytest
from PIL import Image

from reasonvqa.tasks.sources.jpeg_header import JpegHeaderError, jpeg_size


def encode(width: int, height: int, **options) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(buffer, format="JPEG", **options)
    return buffer.getvalue()


@pytest.mark.parametrize("options", [{}, {"progressive": True}, {"exif": b"Exif\x00\x00" + b"\x00" * 60000},
                                     {"quality": 95, "subsampling": 0}])
def test_size_from_the_frame_header(options):
    assert jpeg_size(io.BytesIO(encode(321, 123, **options))) == (321, 123)


def test_fill_bytes_before_a_marker_are_skipped():
    data = encode(40, 30)
    padded = data[:2] + b"\xff\xff\xff" + data[2:]  # fill bytes (0xFF) may precede any marker
    assert jpeg_size(io.BytesIO(padded)) == (40, 30)


def test_reads_only_the_header():
    data = encode(2000, 1500)

    class Counting(io.BytesIO):
        read_bytes = 0

        def read(self, n=-1):
            chunk = super().read(n)
            Counting.read_bytes += len(chunk)
            return chunk

    assert jpeg_size(Counting(data)) == (2000, 1500)
    assert Counting.read_bytes <= 4096 < len(data)


@pytest.mark.parametrize("data, message", [
    (b"GIF89a....", "not a JPEG"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF", "ends before its frame header"),
    (b"\xff\xd8\xff\xda\x00\x08" + b"\x00" * 20, "scan data"),
    (b"\xff\xd8\x00\x00" + b"\x00" * 20, "marker expected at byte 2"),
])
def test_bad_headers(data, message):
    with pytest.raises(JpegHeaderError, match=message):
        jpeg_size(io.BytesIO(data))
