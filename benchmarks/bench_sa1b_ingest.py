"""Benchmark: SA-1B tar shard ingest against the read floor (tar walk + JSON parse alone), one core.

    python -m benchmarks.bench_sa1b_ingest [--size-mb 1024] [--annotations 100] [--repeats 3] [--baseline CHECKOUT]

Generates ``sa_000000.tar`` of ``--size-mb`` in benchmarks/_tmp/sa1b/ (git-ignored): images of
2000x1500 whose JPEG is one real encoded noise picture (~0.5 MB) and whose JSON holds
``--annotations`` annotations cycled from the bundled real SA-1B excerpt (real COCO RLE
strings, new ids). Then, each in a fresh single-threaded interpreter run by benchmarks/measure.py
(peak RSS: the high-water mark of its process tree; wall and CPU seconds timed inside the run),
after one `cat` of the tar to warm the page cache (imports, including the pandas import that
pyarrow makes on its first conversion of Python lists, are not timed):

* ``floor``: Python ``tarfile`` walk of every member + ``json.loads`` of every JSON (what any
  reader must do; the issue's baseline);
* ``floor_orjson``: the same walk with ``orjson.loads`` (the parser the ingest uses), the lowest
  floor a Python reader has;
* ``gnu_tar``: ``tar -xOf <tar> --wildcards '*.json' > /dev/null`` (members streamed out, no parse; wall time);
* ``floor_gnu_tar``: the issue's ``tar`` literally: GNU ``tar -xOf <tar> --wildcards '*.json'`` piped into this
  process, which parses each document with the standard library's JSON decoder (``raw_decode`` over the
  concatenated stream, what ``json.loads`` does per file); CPU = the ``tar`` child's + this process's;
* ``ingest``: ``Sa1bSource`` plan/read (safe member checks, JPEG header, validation, RLE area
  check with pycocotools, Arrow columns) + ``write_shard`` of images and regions as zstd Parquet;
* ``ingest_no_area``: the same with ``verify_area: false`` (what the RLE area check costs);
* with ``--baseline CHECKOUT``: ``ingest`` and ``ingest_no_area`` of that checkout (its ``.venv``), each run
  beside this one's in every repetition (alternating), so both see the same machine load.

Reports the medians of images/s, regions/s, CPU seconds, the ingest / floor time ratios and peak RSS,
and the load average.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from benchmarks import measure as harness

TMP = Path(__file__).resolve().parent / "_tmp" / "sa1b"
ONE_CORE_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "ARROW_NUM_THREADS": "1"}


def generate(size_mb: float, annotations: int) -> Path:
    """Write (once) a tar shard of about ``size_mb`` MB; return its path."""
    import numpy as np
    from PIL import Image

    from reasonvqa.paths import SAMPLE_DIR

    path = TMP / f"{int(size_mb)}mb-{annotations}" / "sa_000000.tar"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(SAMPLE_DIR / "sa1b" / "sa_000020.tar") as sample:
        real = json.loads(sample.extractfile("sa_226381.json").read())["annotations"]
    rng = np.random.default_rng(0)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (1500, 2000, 3), dtype=np.uint8)).save(buffer, "JPEG", quality=30)
    jpeg = buffer.getvalue()
    limit, image_id, ann_id = size_mb * 1e6, 0, 0
    tmp = path.with_suffix(".tmp")
    with tarfile.open(tmp, "w", format=tarfile.GNU_FORMAT) as archive:
        while tmp.stat().st_size < limit:
            image_id += 1
            anns = []
            for k in range(annotations):
                ann_id += 1
                anns.append({**real[k % len(real)], "id": ann_id})
            doc = {"image": {"image_id": image_id, "width": 2000, "height": 1500, "file_name": f"sa_{image_id}.jpg"},
                   "annotations": anns}
            for name, data in ((f"sa_{image_id}.jpg", jpeg), (f"sa_{image_id}.json", json.dumps(doc).encode())):
                info = tarfile.TarInfo(name)
                info.size, info.mtime = len(data), 0
                archive.addfile(info, io.BytesIO(data))
            archive.fileobj.flush()
    os.replace(tmp, path)
    return path


def run_floor(tar: Path, parser: str = "json") -> dict:
    import orjson

    loads = orjson.loads if parser == "orjson" else json.loads
    images = regions = 0
    with tarfile.open(tar, "r:") as archive:
        for member in archive:
            if member.name.endswith(".json"):
                doc = loads(archive.extractfile(member).read())
                images += 1
                regions += len(doc["annotations"])
    return {"images": images, "regions": regions}


def run_gnu_tar_floor(tar: Path) -> dict:
    """GNU ``tar`` streams the JSON members out, this process reads the pipe and parses each document."""
    decoder = json.JSONDecoder()
    with subprocess.Popen(["tar", "-xOf", str(tar), "--wildcards", "*.json"], stdout=subprocess.PIPE) as child:
        text = child.stdout.read().decode("utf-8")  # type: ignore[union-attr]
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, child.args)
    images = regions = position = 0
    while position < len(text):
        doc, position = decoder.raw_decode(text, position)
        images += 1
        regions += len(doc["annotations"])
    return {"images": images, "regions": regions}


def run_ingest(tar: Path, verify_area: bool = True) -> dict:
    import pyarrow as pa

    from reasonvqa.stage import write_shard
    from reasonvqa.tasks.sources.sa1b import Sa1bConfig, Sa1bSource

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    source, config = Sa1bSource(), Sa1bConfig(kind="sa1b", path=tar.parent, verify_area=verify_area)
    images = regions = rejected = shards = 0
    with tempfile.TemporaryDirectory() as out:
        for unit in source.plan(config, 1000):
            for result in source.read(config, unit, 1000):
                stats = write_shard(Path(out), shards, result)
                shards += 1
                images += result.outputs["images"].num_rows
                regions += result.outputs["regions"].num_rows
                rejected += sum(stats["rejected"].values())
    return {"images": images, "regions": regions, "rejected": rejected, "shards": shards}


def measure(kind: str, tar: Path) -> dict:
    """Run one measurement in this (fresh) interpreter and print it as JSON (imports are not timed)."""
    if kind.startswith("ingest"):
        import pyarrow as pa

        import reasonvqa.stage  # noqa: F401
        import reasonvqa.tasks.sources.sa1b  # noqa: F401

        pa.array([[0.0]])  # pyarrow's first conversion of Python lists imports pandas (~0.35 s here): an import too
    start, cpu, child_cpu = time.perf_counter(), time.process_time(), children_cpu_s()
    if kind == "floor_gnu_tar":
        counts = run_gnu_tar_floor(tar)
    elif kind.startswith("floor"):
        counts = run_floor(tar, "orjson" if kind == "floor_orjson" else "json")
    else:
        counts = run_ingest(tar, verify_area=kind == "ingest")
    return {**counts, "wall_s": time.perf_counter() - start,
            "cpu_s": time.process_time() - cpu + children_cpu_s() - child_cpu}


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def subprocess_measure(kind: str, tar: Path, where: harness.Side | None = None) -> dict:
    """``kind`` in a fresh interpreter (``where``: another checkout's), on one core; its timed figures
    plus the peak RSS of its process tree."""
    where = where or harness.side(None, kind)
    command = [where.python, "-m", "benchmarks.bench_sa1b_ingest", "--child", "--measure", kind, "--tar", str(tar)]
    if shutil.which("taskset"):
        command = ["taskset", "-c", "0", *command]
    run = harness.run_once(command, cwd=where.cwd, env={**os.environ, **ONE_CORE_ENV}, label=kind)
    return {**run.result, "peak_rss_mb": run.peak_mb}


def gnu_tar(tar: Path) -> dict:
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run(["tar", "-xOf", str(tar), "--wildcards", "*.json"], check=True, stdout=sink)
    return {"wall_s": time.perf_counter() - start}


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--annotations", type=int, default=100)
    parser.add_argument("--measure", choices=["floor", "floor_orjson", "floor_gnu_tar", "ingest", "ingest_no_area"])
    parser.add_argument("--tar", type=Path)
    args = parser.parse_args()
    if args.measure:
        harness.child_result(measure(args.measure, args.tar))
        return
    tar = generate(args.size_mb, args.annotations)
    with open(tar, "rb") as handle:  # warm the page cache so every run reads from memory
        while handle.read(1 << 24):
            pass
    kinds = ("floor", "floor_orjson", "floor_gnu_tar", "ingest", "ingest_no_area")
    compared = ("ingest", "ingest_no_area") if args.baseline else ()
    baseline = harness.side(args.baseline, "baseline") if args.baseline else None
    runs: dict[str, list[dict]] = {kind: [] for kind in (*kinds, *(f"compare_{k}" for k in compared), "gnu_tar")}
    load = [harness.load_average()]
    for repeat in range(args.repeats):
        runs["gnu_tar"].append(gnu_tar(tar))
        for kind in kinds:
            first_baseline = kind in compared and repeat % 2 == 1  # A B, then B A
            if first_baseline:
                runs[f"compare_{kind}"].append(subprocess_measure(kind, tar, baseline))
            runs[kind].append(subprocess_measure(kind, tar))
            if kind in compared and not first_baseline:
                runs[f"compare_{kind}"].append(subprocess_measure(kind, tar, baseline))
    load.append(harness.load_average())
    best = {k: {m: statistics.median(r[m] for r in v) for m in v[0] if isinstance(v[0][m], (int, float))}
            for k, v in runs.items()}  # the median of each figure
    floor, ingest = best["floor"], best["ingest"]
    report = {
        "tar_mb": round(tar.stat().st_size / 1e6, 1), "images": ingest["images"], "regions": ingest["regions"],
        "rejected": ingest["rejected"], "shards": ingest["shards"],
        "gnu_tar_json_out_s": round(best["gnu_tar"]["wall_s"], 2),
        **{f"{k}_{m}": round(r[m], 3) for k, r in (("floor", floor), ("floor_orjson", best["floor_orjson"]),
                                                   ("floor_gnu_tar", best["floor_gnu_tar"]), ("ingest", ingest),
                                                   ("ingest_no_area", best["ingest_no_area"]))
           for m in ("wall_s", "cpu_s", "peak_rss_mb")},
        "ingest_images_per_cpu_s": round(ingest["images"] / ingest["cpu_s"], 1),
        "ingest_regions_per_cpu_s": round(ingest["regions"] / ingest["cpu_s"]),
        "floor_images_per_cpu_s": round(floor["images"] / floor["cpu_s"], 1),
        "ingest_no_area_over_floor_cpu": round(best["ingest_no_area"]["cpu_s"] / floor["cpu_s"], 2),
        "ingest_images_per_s": round(ingest["images"] / ingest["wall_s"], 1),
        "ingest_regions_per_s": round(ingest["regions"] / ingest["wall_s"]),
        "floor_images_per_s": round(floor["images"] / floor["wall_s"], 1),
        "ingest_over_floor_wall": round(ingest["wall_s"] / floor["wall_s"], 2),
        "ingest_over_floor_cpu": round(ingest["cpu_s"] / floor["cpu_s"], 2),
        "ingest_over_floor_orjson_cpu": round(ingest["cpu_s"] / best["floor_orjson"]["cpu_s"], 2),
        "ingest_over_floor_gnu_tar_cpu": round(ingest["cpu_s"] / best["floor_gnu_tar"]["cpu_s"], 2),
        **{f"compare_{k}_{m}": round(best[f"compare_{k}"][m], 3) for k in compared for m in ("cpu_s", "peak_rss_mb")},
        **{f"compare_ingest_over_{f}_cpu": round(best["compare_ingest"]["cpu_s"] / best[f]["cpu_s"], 2)
           for f in ("floor", "floor_orjson", "floor_gnu_tar") if compared},
        "load_average_before_after": load,
        "all_runs": runs,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
