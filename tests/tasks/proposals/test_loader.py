"""The proposals loader: images read, digested, decoded and transformed by threads a batch ahead, in order."""

import hashlib
import threading

import numpy as np
from PIL import Image

from reasonvqa.tasks.proposals.loader import ImageItem, prefetched_batches


def test_batches_come_in_order_with_digests_pixels_inputs_and_the_errors_of_unreadable_files(tmp_path):
    rng = np.random.default_rng(0)
    items = []
    for n in range(5):
        Image.fromarray(rng.integers(0, 255, (12, 16 + n, 3), dtype=np.uint8)).save(tmp_path / f"{n}.png")
        items.append(ImageItem(f"t:{n}", tmp_path / f"{n}.png", f"{n}.png", ("dog",)))
    (tmp_path / "bad.jpg").write_bytes(b"not a jpeg")
    items.insert(2, ImageItem("t:bad", tmp_path / "bad.jpg", "bad.jpg", ()))
    items.append(ImageItem("t:missing", tmp_path / "missing.jpg", "missing.jpg", ()))
    batches = list(prefetched_batches(items, 3, lambda image: image.size))
    assert [[loaded.item.image_id for loaded in batch] for batch in batches] == [
        ["t:0", "t:1", "t:bad"], ["t:2", "t:3", "t:4"], ["t:missing"]]
    loaded = {one.item.image_id: one for batch in batches for one in batch}
    first = loaded["t:0"]
    assert first.digest == hashlib.sha256((tmp_path / "0.png").read_bytes()).hexdigest()
    assert first.image.mode == "RGB" and first.detector_input == (16, 12) and first.pixels.shape == (12, 16, 3)
    assert loaded["t:4"].detector_input == (20, 12) and loaded["t:4"].error is None
    bad = loaded["t:bad"]
    assert bad.image is None and bad.digest == hashlib.sha256(b"not a jpeg").hexdigest()
    assert bad.error == f"UnidentifiedImageError: cannot identify image file {str(tmp_path / 'bad.jpg')!r}"
    missing = loaded["t:missing"]
    assert missing.digest is None and missing.error.startswith("FileNotFoundError: [Errno 2] No such file or directory")


def test_the_next_batch_loads_while_the_caller_works_on_this_one(tmp_path):
    items = []
    for n in range(4):
        Image.new("RGB", (8, 8), (n, n, n)).save(tmp_path / f"{n}.png")
        items.append(ImageItem(f"t:{n}", tmp_path / f"{n}.png", f"{n}.png", ()))
    second_batch_loaded = threading.Event()

    def transform(image):
        if image.getpixel((0, 0))[0] >= 2:
            second_batch_loaded.set()
        return image.size

    batches = prefetched_batches(items, 2, transform)
    first = next(batches)
    assert [one.item.image_id for one in first] == ["t:0", "t:1"]
    assert second_batch_loaded.wait(timeout=30), "batch 2 was not loaded ahead of the caller's request"
    assert [one.item.image_id for one in next(batches)] == ["t:2", "t:3"]
