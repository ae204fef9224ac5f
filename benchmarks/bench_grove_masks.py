"""Benchmark: Grove's mask score for 10,000 grounded predictions with up to 20 masks each (target: under 30 s).

    python -m benchmarks.bench_grove_masks [--questions 10000] [--per-image 10] [--repeats 3] [--json FILE]

A synthetic split of ``--questions`` grounded questions on 640 x 480 images, ``--per-image`` questions per
image; each image has 30 ground-truth regions (ellipses of 20-200 px; 40 layouts drawn, reused), each question 0-20 of them as evidence
(a quarter of them none: hallucination questions) and 0-20 predicted masks (its regions shifted by a few
pixels, some dropped, some spurious). Setup (drawing and encoding the masks, writing the predictions JSONL) is
not timed; the timed phases are what ``reasonvqa evaluate`` does for these questions:

- ``read_s``: ``read_predictions`` (parse, check every RLE, sizes against the image);
- ``score_s``: ``grove.mask_scores``: one pycocotools IoU call per image, ``linear_sum_assignment`` per question;
- ``--per-question`` (the comparison): one IoU call per question instead.

The child prints its phase times and the mean S_m (the same for both modes: asserted by comparing runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.measure import child_result, measure_workload, parser

H, W, REGIONS_PER_IMAGE, MAX_MASKS, LAYOUTS = 480, 640, 30, 20, 40


def ellipse(cy: float, cx: float, ry: float, rx: float) -> np.ndarray:
    yy, xx = np.ogrid[:H, :W]
    return ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1


def synthetic(questions: int, per_image: int, folder: Path, seed: int = 0):
    """(image ids, truth ids, regions, predictions path, sizes) of a synthetic grounded split."""
    from reasonvqa import masks

    rng = np.random.default_rng(seed)
    images = -(-questions // per_image)
    regions: dict[str, dict] = {}
    image_ids, truth_ids, lines = [], [], []
    layouts = []  # LAYOUTS distinct images' regions, reused (under new region ids) by the others
    for _ in range(min(images, LAYOUTS)):
        centers = rng.uniform([60, 60], [H - 60, W - 60], size=(REGIONS_PER_IMAGE, 2))
        radii = rng.uniform(10, 100, size=(REGIONS_PER_IMAGE, 2))
        truth = np.stack([ellipse(*c, *r) for c, r in zip(centers, radii)])
        shifted = np.stack([ellipse(*(c + rng.integers(-6, 7, 2)), *r) for c, r in zip(centers, radii)])
        layouts.append((masks.coco_encode_stack(truth), masks.coco_encode_stack(shifted)))
    for image in range(images):
        truth_rles, shifted_rles = layouts[image % len(layouts)]
        for r, rle in enumerate(truth_rles):
            regions[f"img{image}/r{r}"] = masks.coco_checked(rle)
        for q in range(min(per_image, questions - image * per_image)):
            hallucination = rng.random() < 0.25
            chosen = [] if hallucination else rng.choice(REGIONS_PER_IMAGE, rng.integers(1, MAX_MASKS + 1), replace=False).tolist()
            kept = [shifted_rles[r] for r in chosen if rng.random() < 0.9]
            spurious = rng.choice(REGIONS_PER_IMAGE, rng.integers(0, 3), replace=False).tolist()
            predicted = (kept + [shifted_rles[r] for r in spurious])[:MAX_MASKS]
            question_id = f"q{image}-{q}"
            image_ids.append(f"img{image}")
            truth_ids.append([f"img{image}/r{r}" for r in chosen])
            lines.append(json.dumps({"question_id": question_id, "answer": "x", "masks": predicted}))
    path = folder / "predictions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    sizes = {json.loads(line)["question_id"]: (H, W) for line in lines}
    return image_ids, truth_ids, regions, path, sizes


def per_question_scores(truth_ids, predicted, regions) -> np.ndarray:
    """The comparison: one IoU call per question."""
    from reasonvqa import masks
    from reasonvqa.tasks.evaluate.grove import mask_score

    return np.array([mask_score(masks.coco_iou_matrix(p, [regions[r] for r in t])) for t, p in zip(truth_ids, predicted)])


def child(args: argparse.Namespace) -> None:
    from reasonvqa.tasks.evaluate.grove import mask_scores
    from reasonvqa.tasks.evaluate.predictions import read_predictions

    with tempfile.TemporaryDirectory(prefix="bench-grove-") as folder:
        started = time.perf_counter()
        image_ids, truth_ids, regions, path, sizes = synthetic(args.questions, args.per_image, Path(folder))
        setup_s = time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        read = read_predictions(path, sizes)
        read_s, read_cpu_s = time.perf_counter() - started, time.process_time() - cpu
        predicted = [read.by_id[q].masks for q in sizes]
        started, cpu = time.perf_counter(), time.process_time()
        scores = (per_question_scores(truth_ids, predicted, regions) if args.per_question
                  else mask_scores(image_ids, truth_ids, predicted, regions))
        score_s, score_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    child_result({"questions": len(scores), "masks": sum(map(len, predicted)), "problems": len(read.problems),
                  "mean_s_m": round(float(np.mean(scores)), 6), "setup_s": round(setup_s, 2), "read_s": round(read_s, 2),
                  "score_s": round(score_s, 2), "read_and_score_s": round(read_s + score_s, 2),
                  "read_cpu_s": round(read_cpu_s, 2), "score_cpu_s": round(score_cpu_s, 2),
                  "mode": "per-question" if args.per_question else "per-image"})


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--questions", type=int, default=10_000)
    p.add_argument("--per-image", type=int, default=10)
    p.add_argument("--per-question", action="store_true", help="one IoU call per question (the comparison)")
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    child_args = ["--questions", str(args.questions), "--per-image", str(args.per_image)]
    results = {}
    for mode, extra in (("per-image", []), ("per-question", ["--per-question"])):
        result = measure_workload("benchmarks.bench_grove_masks", child_args + extra, args,
                                  f"Grove masks, {args.questions} questions ({mode})")
        results[mode] = [run["result"] for run in result["runs"]]
        for run in results[mode]:
            print(json.dumps(run, sort_keys=True))
    means = {run["mean_s_m"] for runs in results.values() for run in runs}
    assert len(means) == 1, f"the modes disagree: {means}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
