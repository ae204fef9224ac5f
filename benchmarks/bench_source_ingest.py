"""Benchmark: streaming Visual Genome ingest vs loading the file whole.

Generates a synthetic Visual Genome ``objects.json`` of ``--size-mb`` (plus its
``image_data.json``) in benchmarks/_tmp/ with a streaming writer, then runs, each in a
fresh subprocess so peak RSS is its own:

* ``ingest``: ``tasks.sources.vg.ingest_vg`` on the full file (the code under test);
* ``ijson_parse``: ijson iteration over the same file without any processing
  (how much of the time is parsing);
* ``json_load`` (baseline): ``json.load`` of a ``--baseline-mb`` slice generated the
  same way, the naive whole-file approach, scaled per MB of input.

Reports peak RSS, RSS per input MB and throughput (per wall and per CPU second), and
their ratios to the baseline.
Run: ``python -m benchmarks.bench_source_ingest --size-mb 1000`` (or small: ``--size-mb 50``).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

TMP = Path(__file__).resolve().parent / "_tmp"
NAMES = ["man", "shirt", "tree", "window", "car", "sign", "building", "street light", "table top", "woman",
         "hand", "head", "grass", "sky", "wall", "plate", "dog", "cloud", "leaf", "pole"]
OBJECTS_PER_IMAGE = 35


def generate(folder: Path, size_mb: float, seed: int = 0) -> None:
    """Write image_data.json and objects.json (~size_mb) in the released one-line-array format."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "objects.json").exists() and (folder / "image_data.json").exists():
        return
    rng = random.Random(seed)
    limit = int(size_mb * 1e6)
    written, image_id, object_id = 0, 0, 0
    sizes: list[tuple[int, int, int]] = []
    with open(folder / "objects.json.tmp", "w", encoding="utf-8") as out:
        out.write("[")
        while written < limit:
            image_id += 1
            width, height = rng.choice([(800, 600), (640, 480), (500, 375), (1024, 768)])
            sizes.append((image_id, width, height))
            objects = []
            for _ in range(OBJECTS_PER_IMAGE):
                object_id += 1
                name = rng.choice(NAMES)
                synsets = "[]" if rng.random() < 0.1 else f'["{name.replace(" ", "_")}.n.01"]'
                x, y = rng.randint(-3, width - 10), rng.randint(-3, height - 10)  # a few overhang slightly
                w, h = rng.randint(5, width - max(x, 0) + 3), rng.randint(5, height - max(y, 0) + 3)
                objects.append(f'{{"synsets": {synsets}, "h": {h}, "object_id": {object_id}, "names": ["{name}"], '
                               f'"w": {w}, "y": {y}, "x": {x}}}')
            record = f'{{"image_id": {image_id}, "objects": [{", ".join(objects)}]}}'
            out.write(("" if image_id == 1 else ", ") + record)
            written += len(record) + 2
        out.write("]")
    images = [{"width": w, "url": f"https://cs.stanford.edu/people/rak248/VG_100K/{i}.jpg", "height": h,
               "image_id": i, "coco_id": None, "flickr_id": None} for i, w, h in sizes]
    (folder / "image_data.json").write_text(json.dumps(images), encoding="utf-8")
    (folder / "objects.json.tmp").rename(folder / "objects.json")


# Child programs (run in the repository root): each prints one JSON line with its timing and peak RSS
# (benchmarks._measure: VmHWM) in KiB.
_CHILD_PRELUDE = """
import json, resource, sys, time
from pathlib import Path
from benchmarks._measure import status_kib
folder = Path(sys.argv[1]); out = Path(sys.argv[2]); shard_size = int(sys.argv[3])
import ijson, pyarrow, tasks.sources.vg
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
def peak_kib():
    return status_kib("VmHWM")
base = peak_kib()
start, cpu_start = time.perf_counter(), cpu()
"""
_CHILD_EPILOGUE = """
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu() - cpu_start, "peak_kib": peak_kib(), "base_kib": base, **extra}))
"""
CHILDREN = {
    "ingest": """
from reasonvqa.stage import summarize
stats = tasks.sources.vg.ingest_vg(folder, out / "vg", shard_size=shard_size)
total = summarize(stats)
extra = {"rows_in": total["rows_in"], "rows_out": total["rows_out"], "shards": total["shards"],
         "boxes_clipped": sum(s["boxes_clipped"] for s in stats)}
""",
    "ijson_parse": """
n = sum(len(r["objects"]) for r in ijson.items(open(folder / "objects.json", "rb"), "item", use_float=True))
extra = {"objects": n}
""",
    "json_load": """
data = json.load(open(folder / "objects.json", encoding="utf-8"))
extra = {"objects": sum(len(r["objects"]) for r in data)}
""",
}


def run_child(kind: str, folder: Path, shard_size: int) -> dict:
    """Run one measurement in a fresh interpreter and return its JSON report."""
    with tempfile.TemporaryDirectory(dir=TMP) as out:
        code = _CHILD_PRELUDE + CHILDREN[kind] + _CHILD_EPILOGUE
        done = subprocess.run([sys.executable, "-c", code, str(folder), out, str(shard_size)],
                              check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["input_mb"] = (folder / "objects.json").stat().st_size / 1e6
    report["peak_mb"] = report["peak_kib"] / 1024
    report["growth_mb"] = (report["peak_kib"] - report["base_kib"]) / 1024  # above the interpreter + imports
    report["mb_per_s"] = report["input_mb"] / report["seconds"]
    report["mb_per_cpu_s"] = report["input_mb"] / report["cpu_seconds"]
    report["peak_mb_per_input_mb"] = report["peak_mb"] / report["input_mb"]
    report["growth_mb_per_input_mb"] = report["growth_mb"] / report["input_mb"]
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1000, help="size of the synthetic objects.json to ingest")
    parser.add_argument("--baseline-mb", type=float, default=100, help="size of the slice that json.load reads whole")
    parser.add_argument("--shard-size", type=int, default=5000)
    args = parser.parse_args(argv)
    TMP.mkdir(parents=True, exist_ok=True)
    big, small = TMP / f"vg_{args.size_mb:g}mb", TMP / f"vg_{args.baseline_mb:g}mb"
    generate(big, args.size_mb)
    generate(small, args.baseline_mb)
    results = {
        "json_load": run_child("json_load", small, args.shard_size),
        "ijson_parse": run_child("ijson_parse", big, args.shard_size),
        "ingest": run_child("ingest", big, args.shard_size),
    }
    base, ingest = results["json_load"], results["ingest"]
    summary = {
        "results": results,
        "input_mb": round(ingest["input_mb"], 1),
        "ingest_peak_rss_mb": round(ingest["peak_mb"], 1),
        "rss_per_mb_ratio_vs_json_load": round(ingest["peak_mb_per_input_mb"] / base["peak_mb_per_input_mb"], 4),
        "rss_growth_per_mb_ratio_vs_json_load": round(ingest["growth_mb_per_input_mb"] / base["growth_mb_per_input_mb"], 4),
        "json_load_projected_peak_mb_for_full_file": round(base["base_kib"] / 1024 + base["growth_mb_per_input_mb"] * ingest["input_mb"]),
        # CPU-time throughput: the machine is shared, so wall-clock rates are noisy
        "throughput_ratio_vs_json_load": round(ingest["mb_per_cpu_s"] / base["mb_per_cpu_s"], 3),
        "throughput_ratio_vs_ijson_parse": round(ingest["mb_per_cpu_s"] / results["ijson_parse"]["mb_per_cpu_s"], 3),
    }
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
