"""Benchmark: peak memory of `images fetch` against the number of images (streamed in batches).

    python -m benchmarks.bench_fetch_memory [--images 1000] [--image-kb 300] [--batches 50 500] [--old FILE]

A release of N image rows (URLs only) is written once; a `python -m http.server` on 127.0.0.1
serves N noise JPEGs of about --image-kb each from a folder (its own process, so its memory is not
counted). Each fetch runs in a fresh child process, which reports its peak RSS (ru_maxrss), CPU
seconds and the product's own count of images held at once (``FetchReport.peak_held``). ``--old``
names a copy of an earlier tasks/release/images.py (e.g. ``git show d25f308:tasks/release/images.py``)
to run as the baseline in the same run.
"""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import importlib.util, json, resource, sys
from pathlib import Path
release, dest, batch, old = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if old:
    spec = importlib.util.spec_from_file_location("old_images", old)
    module = importlib.util.module_from_spec(spec); sys.modules["old_images"] = module; spec.loader.exec_module(module)
    report = module.fetch_images(Path(release), Path(dest), workers=8)
else:
    from reasonvqa.tasks.release.images import fetch_images
    report = fetch_images(Path(release), Path(dest), workers=8, batch=batch)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"fetched": report.fetched, "failed": len(report.failed), "peak_held": getattr(report, "peak_held", None),
                  "peak_rss_mb": round(usage.ru_maxrss / 1024), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                  "table_mb": round(Path(report.table).stat().st_size / 1e6)}))
"""


def noise_jpeg(kb: int, seed: int) -> tuple[bytes, int, int]:
    """A JPEG of random pixels of about ``kb`` KB (noise does not compress), with its width and height;
    each seed its own bytes, so the fetched table cannot share them (Parquet dictionary pages)."""
    import numpy as np
    from PIL import Image

    side = max(16, int((kb * 1024 / 1.2) ** 0.5))
    pixels = np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue(), side, side


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_bench_release(root: Path, images: int, url: str, width: int, height: int) -> Path:
    from reasonvqa import schemas
    from reasonvqa.tasks.release.writer import write_release
    from tests.tasks.release.conftest import question

    rows = [question(f"q{i:06d}", f"vg:{i}", "Paris", ["Paris", "Lyon", "Nice", "Lille"]) for i in range(images)]
    table = schemas.from_rows(rows, schemas.QUESTIONS)
    image_rows = [{"image_id": f"vg:{i}", "source": "vg", "source_image_id": str(i), "width": width, "height": height,
                   "url": f"{url}/{i}.jpg", "license": "CC BY 4.0"} for i in range(images)]
    half = images // 2
    return write_release(root / "out", "bench", "1.0.0", {"train": table.slice(0, half), "test": table.slice(half)},
                         pool=table, stats_dir=None, config={}, inputs={},
                         tables={"images": schemas.from_rows(image_rows, schemas.IMAGES)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--image-kb", type=int, default=300)
    parser.add_argument("--batches", type=int, nargs="+", default=[50, 500])
    parser.add_argument("--old", default="", help="an earlier images.py to run as the baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fetch-memory-") as tmp:
        root = Path(tmp)
        served = root / "served"
        served.mkdir()
        total = 0
        for i in range(args.images):
            body, width, height = noise_jpeg(args.image_kb, i)
            (served / f"{i}.jpg").write_bytes(body)
            total += len(body)
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                   "--directory", str(served)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.0)
            release = write_bench_release(root, args.images, f"http://127.0.0.1:{port}", width, height)
            runs = [("d25f308 (old)", 0, args.old)] if args.old else []
            runs += [(f"batch {b}", b, "") for b in args.batches]
            print(f"{args.images} distinct images, {total / 1e6:.0f} MB in all, 8 workers")
            for k, (label, batch, old) in enumerate(runs):
                out = subprocess.run([sys.executable, "-c", CHILD, str(release), str(root / f"dest-{k}"), str(batch), old],
                                     capture_output=True, text=True, check=True)
                print(label, out.stdout.strip().splitlines()[-1])
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
