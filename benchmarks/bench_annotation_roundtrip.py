"""Benchmark: export and import of an annotation batch of 10,000 items with masks.

    python -m benchmarks.bench_annotation_roundtrip [--items 10000] [--width 640 --height 480]

Data (synthetic, seeded, cached under benchmarks/_tmp/annotation/): a stage folder with
``items / 2`` images of width x height, two regions with COCO RLE masks per image (ellipses,
some cut by the image border) and one question per item, two questions per image.
Each step runs in a fresh interpreter (its peak RSS, VmHWM, is its own):

- baseline: pycocotools decode + encode of every mask once (the least any mask export must do);
- export-labelstudio / export-cvat / export-coco: ``export_batch`` of all items;
- import-labelstudio: a Label Studio JSON export of every task, each annotation accepting one
  region and rejecting the other, 10% of the masks redrawn, 10% of the answers corrected;
- import-cvat: the CVAT XML with every region decided and 10% of the masks redrawn;
- apply: the Label Studio decisions folded into the questions and regions tables.

Times are compared with the baseline of the same run (ratio).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._measure import peak_rss_mb

TMP = Path(__file__).resolve().parent / "_tmp" / "annotation"


def ellipse(width: int, height: int, rng):
    import numpy as np

    cy, cx = rng.uniform(0, height), rng.uniform(0, width)
    ry, rx = rng.uniform(10, height / 3), rng.uniform(10, width / 3)
    yy, xx = np.ogrid[:height, :width]
    mask = (((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1).astype(np.uint8)
    if not mask.any():
        mask[int(cy) % height, int(cx) % width] = 1
    return mask


def make_stage(folder: Path, items: int, width: int, height: int) -> None:
    """The synthetic stage folder (images, regions, questions), written once per size."""
    import numpy as np

    from reasonvqa import schemas
    from reasonvqa.masks import coco_area_and_box, coco_encode
    from reasonvqa.stage import write_parquet

    rng = np.random.default_rng(0)
    n_images = items // 2
    images, regions, questions = [], [], []
    for i in range(n_images):
        image_id = f"sa1b:{i:06d}"
        images.append({"image_id": image_id, "source": "sa1b", "source_image_id": f"{i:06d}", "width": width,
                       "height": height, "file_path": f"img/{i:06d}.jpg"})
        for g in range(2):
            rle = coco_encode(ellipse(width, height, rng))
            area, (x, y, w, h) = coco_area_and_box(rle)
            regions.append({"region_id": f"{image_id}/g{g}", "image_id": image_id, "x": x, "y": y, "w": w, "h": h,
                            "mask": rle, "area": area, "origin": "annotation:sa1b"})
        for q in range(2):
            answer = f"answer {i}-{q}"
            questions.append({"question_id": f"q{i:06d}-{q}", "image_id": image_id, "image_source": "sa1b",
                              "question": f"What is shown in region {q}?", "answer": answer,
                              "choices": [answer, "a", "b", "c"], "n_hop": 1 + (i + q) % 3})
    write_parquet(schemas.from_rows(images, schemas.IMAGES), folder / "images" / "part-00000.parquet")
    write_parquet(schemas.from_rows(regions, schemas.REGIONS), folder / "regions" / "part-00000.parquet")
    write_parquet(schemas.from_rows(questions, schemas.QUESTIONS), folder / "questions" / "part-00000.parquet")


def step(name: str, work: Path, items: int) -> dict:
    """One measured step, in this (fresh) interpreter."""
    import pyarrow.parquet as pq

    from reasonvqa.annotation_exports import coco, cvat, labelstudio  # noqa: F401 (imports are not timed)
    from reasonvqa.annotation_exports.apply import apply_decisions
    from reasonvqa.annotation_exports.decisions import DecisionStore
    from reasonvqa.masks import coco_decode, coco_encode
    from reasonvqa.annotation_exports.roundtrip import export_batch, import_decisions
    from reasonvqa.annotation_exports.tables import read_source_tables

    stage = work / "stage"
    extra: dict = {}
    start = time.perf_counter()
    if name == "baseline":
        for rle in pq.read_table(stage / "regions" / "part-00000.parquet", columns=["mask"])["mask"].to_pylist():
            coco_encode(coco_decode(rle))
    elif name.startswith("export-"):
        fmt = name.removeprefix("export-")
        store = work / f"store-{fmt}"
        shutil.rmtree(store, ignore_errors=True)
        result = export_batch(stage, work / f"batch-{fmt}", fmt, items, store=store)
        assert len(result.batch.items) == items, result.batch.skipped
    elif name.startswith("import-"):
        fmt = name.removeprefix("import-")
        file = work / ("ls_export.json" if fmt == "labelstudio" else "cvat_done.xml")
        report = import_decisions(file, fmt, store=work / f"store-{fmt}")
        assert not report.rejects, report.rejects[:3]
        extra = {"decisions": len(report.decisions)}
    elif name == "apply":
        tables = read_source_tables(stage)
        applied = apply_decisions(DecisionStore(work / "store-labelstudio"), tables.questions, {"regions": tables.regions})
        extra = {"decisions": len(applied.used)}
    seconds = time.perf_counter() - start
    return {"step": name, "seconds": round(seconds, 2), "peak_rss_mb": round(peak_rss_mb()), **extra}


def annotate(work: Path, width: int, height: int) -> None:
    """What annotators send back: a Label Studio JSON export and an edited CVAT XML (not timed)."""
    import xml.etree.ElementTree as ET

    import numpy as np

    from reasonvqa.masks import cvat_encode, labelstudio_encode

    rng = np.random.default_rng(1)
    tasks = json.loads((work / "batch-labelstudio" / "tasks.json").read_text())
    export = []
    for n, task in enumerate(tasks):
        results = task["predictions"][0]["result"]
        brushes = [r for r in results if r["type"] == "brushlabels"]
        if n % 10 == 0:  # a redrawn mask: a new region id, matched back by IoU
            brushes[0] = {**brushes[0], "id": f"new{n}",
                          "value": {**brushes[0]["value"], "rle": labelstudio_encode(ellipse(width, height, rng))}}
        answer = [r for r in results if r["from_name"] == "answer"]
        if n % 10 == 5:
            answer = [{**answer[0], "value": {"text": [f"corrected {n}"]}}]
        choices = [{"id": brushes[0]["id"], "from_name": "region_decision", "to_name": "image", "type": "choices",
                    "value": {"choices": ["accept"]}},
                   {"id": brushes[1]["id"], "from_name": "region_decision", "to_name": "image", "type": "choices",
                    "value": {"choices": ["reject"]}}]
        export.append({"id": n + 1, "data": task["data"], "predictions": task["predictions"],
                       "annotations": [{"id": n + 1, "completed_by": 1 + n % 5, "was_cancelled": False,
                                        "result": brushes + answer + choices,
                                        "created_at": "2026-01-05T10:00:00Z", "updated_at": "2026-01-05T10:00:00Z"}]})
    (work / "ls_export.json").write_text(json.dumps(export))
    tree = ET.parse(work / "batch-cvat" / "annotations.xml")
    root = tree.getroot()
    ET.SubElement(root.find("meta"), "dumped").text = "2026-01-06 10:00:00+00:00"
    for n, shape in enumerate(root.iter("mask")):
        shape.find("attribute[@name='decision']").text = "accept" if n % 2 == 0 else "reject"
        if n % 10 == 0:
            redrawn = cvat_encode(ellipse(width, height, rng))
            shape.attrib.update(rle=redrawn.rle, left=str(redrawn.left), top=str(redrawn.top),
                                width=str(redrawn.width), height=str(redrawn.height))
    tree.write(work / "cvat_done.xml", encoding="utf-8", xml_declaration=True)


def run_step(name: str, work: Path, items: int) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_annotation_roundtrip", "--step", name,
                           "--work", str(work), "--items", str(items)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    if done.returncode != 0:
        raise RuntimeError(f"step {name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--step")
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(step(args.step, args.work, args.items)))
        return
    work = TMP / f"{args.items}-{args.width}x{args.height}"
    if not (work / "stage" / "questions").exists():
        make_stage(work / "stage", args.items, args.width, args.height)
    rows = [run_step(name, work, args.items) for name in ("baseline", "export-labelstudio", "export-cvat", "export-coco")]
    annotate(work, args.width, args.height)
    rows += [run_step(name, work, args.items) for name in ("import-labelstudio", "import-cvat", "apply")]
    base = rows[0]["seconds"]
    print(f"{args.items} items, {args.items} masks of {args.width}x{args.height} ({args.items // 2} images)")
    print("| step | seconds | x baseline | peak RSS MB | decisions |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['step']} | {r['seconds']:.2f} | {r['seconds'] / base:.1f} | {r['peak_rss_mb']} | {r.get('decisions', '')} |")


if __name__ == "__main__":
    main()
