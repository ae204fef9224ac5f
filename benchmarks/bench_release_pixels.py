"""Benchmark: embedding image bytes in a release's images table, against not embedding and the read floor.

    python -m benchmarks.bench_release_pixels [--images 2000] [--repeat 2]

Generates (once) ``--images`` JPEGs of 640x480 (noise at quality 75, ~100 KB each, like Visual
Genome photos) in benchmarks/_tmp/pixels/VG_100K/ (git-ignored) and an images table of ``vg`` rows
pointing at them. Then, each in a fresh interpreter (peak RSS = its VmHWM), after one read of every
file to warm the page cache (imports are not timed):

* ``never``: the images table written with ``release.embed_images: never`` (the baseline: no bytes read);
* ``floor``: every file read (``Path.read_bytes``), nothing else: what any embedding must pay;
* ``auto``: the table written with the bytes embedded (``EmbeddedImages``: read through the source,
  decode check at 1/8 scale, Parquet in files of 500 rows).

Reports images/s, CPU seconds, MB written and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._measure import peak_rss_mb

TMP = Path(__file__).resolve().parent / "_tmp" / "pixels"
WIDTH, HEIGHT = 640, 480


def generate(count: int) -> Path:
    """Write (once) ``count`` JPEGs under TMP/VG_100K; return TMP."""
    import io

    import numpy as np
    from PIL import Image

    folder = TMP / "VG_100K"
    if len(list(folder.glob("*.jpg"))) >= count:
        return TMP
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for n in range(1, count + 1):
        buffer = io.BytesIO()
        noise = rng.integers(0, 256, (HEIGHT // 4, WIDTH // 4, 3), dtype=np.uint8)
        Image.fromarray(noise).resize((WIDTH, HEIGHT)).save(buffer, "JPEG", quality=75)
        (folder / f"{n}.jpg").write_bytes(buffer.getvalue())
    return TMP


def images_table(count: int):
    from reasonvqa import schemas

    rows = [{"image_id": f"vg:{n}", "source": "vg", "source_image_id": str(n), "width": WIDTH, "height": HEIGHT,
             "file_path": f"VG_100K/{n}.jpg", "license": "CC BY 4.0"} for n in range(1, count + 1)]
    return schemas.from_rows(rows, schemas.IMAGES)


def measure(kind: str, count: int) -> dict:
    from reasonvqa.paths import SAMPLE_DIR
    from reasonvqa.sources import parse_config
    from reasonvqa.tasks.release.embed import RELEASE_IMAGES, EmbeddedImages
    from reasonvqa.tasks.release.pixels import PixelReader
    from reasonvqa.tasks.release.writer import write_table_files

    table = images_table(count)
    reader = PixelReader([parse_config({"kind": "vg", "path": SAMPLE_DIR / "vg", "image_dir": TMP})])
    with tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), time.process_time()
        if kind == "floor":
            written = sum(len((TMP / f"VG_100K/{n}.jpg").read_bytes()) for n in range(1, count + 1))
        else:
            paths = write_table_files(EmbeddedImages(table, reader, kind), Path(out) / "images", RELEASE_IMAGES)
            written = sum(p.stat().st_size for p in paths)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"kind": kind, "images": count, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "images_per_s": round(count / wall, 1), "mb": round(written / 1e6, 1), "peak_rss_mb": round(peak_rss_mb(), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.images)))
        return
    generate(args.images)
    for n in range(1, args.images + 1):  # warm the page cache
        (TMP / f"VG_100K/{n}.jpg").read_bytes()
    print(open("/proc/loadavg").read().strip())
    for _ in range(args.repeat):
        for kind in ("never", "floor", "auto"):
            done = subprocess.run([sys.executable, "-m", "benchmarks.bench_release_pixels", "--images", str(args.images),
                                   "--measure", kind], capture_output=True, text=True, check=True)
            print(done.stdout.strip().splitlines()[-1])
    print(open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
