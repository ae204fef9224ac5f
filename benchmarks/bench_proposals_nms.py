"""Benchmark: NMS time for 100, 900 and 5000 boxes, numpy vs a straightforward loop vs torchvision.

    python -m benchmarks.bench_proposals_nms [--sizes 100,900,5000] [--repeat 50]

Boxes mimic a detector's output: clusters of jittered boxes around ``n / 8`` objects of 12
classes in a 1024x768 image, scores uniform. Measured on one thread (``OMP_NUM_THREADS=1``):

- ``class_count_nms`` and ``nms`` of tasks/proposals/nms.py (numpy: overlap pairs found in x1 windows
  within y1 bands, then the greedy pass in vectorized rounds);
- the straightforward loop: visit boxes in order, compare each with every kept box in
  Python (the brute-force definition the tests check against); its result must equal the
  numpy result (asserted);
- torchvision ``ops.nms`` on its own compiled CPU kernel: next to a CPU torch the CUDA
  torchvision build of this machine needs the test suite's stub CUDA libraries
  (reasonvqa/torchvision_cpu.py); where even that fails the column says so. Its result must equal
  ``nms`` (asserted).

Times are medians of CPU time over ``--repeat`` runs (the loop: fewer runs at large sizes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import numpy as np  # noqa: E402

from reasonvqa.tasks.proposals.nms import class_count_nms, class_count_order, nms, score_order  # noqa: E402


def detector_like_boxes(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    objects = max(1, n // 8)
    centers = rng.uniform([0, 0], [1024, 768], size=(objects, 2))
    sizes = rng.uniform(20, 200, size=(objects, 2))
    owner = rng.integers(0, objects, size=n)
    jitter = rng.normal(0, 0.08, size=(n, 4)) * np.hstack([sizes[owner], sizes[owner]])
    half = sizes[owner] / 2
    boxes = np.hstack([centers[owner] - half, centers[owner] + half]) + jitter
    boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 1)
    labels = rng.integers(0, 12, size=objects)[owner].astype(str)
    return boxes, rng.uniform(0.2, 1.0, size=n), labels


def loop_greedy(boxes: np.ndarray, order: np.ndarray, threshold: float) -> list[int]:
    """The straightforward loop over Python floats."""
    rows = boxes.tolist()
    kept: list[int] = []
    for i in order.tolist():
        a = rows[i]
        area_a = (a[2] - a[0]) * (a[3] - a[1])
        suppressed = False
        for j in kept:
            b = rows[j]
            w = min(a[2], b[2]) - max(a[0], b[0])
            h = min(a[3], b[3]) - max(a[1], b[1])
            if w <= 0 or h <= 0:
                continue
            inter = w * h
            if inter / (area_a + (b[2] - b[0]) * (b[3] - b[1]) - inter) > threshold:
                suppressed = True
                break
        if not suppressed:
            kept.append(i)
    return kept


def median_ms(fn, repeat: int) -> float:
    """Median CPU time of this process per call (ms): on a shared, overloaded VM wall time mostly
    measures waiting for a core; with one thread, CPU time is the single-core cost."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times)


def torchvision_nms():
    """torchvision.ops.nms on its compiled kernel when that loads here, else None."""
    try:
        import torch

        torch.set_num_threads(1)
        from reasonvqa.torchvision_cpu import prepare, real_ops_loaded

        prepare()
        if not real_ops_loaded():
            print("torchvision's compiled kernels do not load here")
            return None
        import torchvision
    except Exception as error:  # a CUDA torchvision next to a CPU torch raises RuntimeError
        print(f"torchvision not usable: {str(error).splitlines()[0]}")
        return None
    return lambda b, s, t: torchvision.ops.nms(torch.from_numpy(b), torch.from_numpy(s), t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,900,5000")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--iou", type=float, default=0.5)
    args = parser.parse_args()
    tv = torchvision_nms()
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    print("| boxes | kept (class-count) | class-count NMS ms | score NMS ms | loop ms (class-count order) "
          "| loop / class-count | torchvision nms ms |")
    print("|---|---|---|---|---|---|---|")
    for n in [int(s) for s in args.sizes.split(",")]:
        boxes, scores, labels = detector_like_boxes(n)
        result = class_count_nms(boxes, scores, labels, args.iou)
        order = class_count_order(scores, labels)
        assert loop_greedy(boxes, order, args.iou) == result.keep.tolist()
        assert loop_greedy(boxes, score_order(scores), args.iou) == nms(boxes, scores, args.iou).tolist()
        ours = median_ms(lambda: class_count_nms(boxes, scores, labels, args.iou), args.repeat)  # noqa: B023 (timed at once)
        plain = median_ms(lambda: nms(boxes, scores, args.iou), args.repeat)  # noqa: B023 (timed at once)
        loop = median_ms(lambda: loop_greedy(boxes, class_count_order(scores, labels), args.iou),  # noqa: B023 (timed at once)
                         max(3, args.repeat // (1 if n <= 1000 else 10)))
        tv_ms = "n/a (ops not loadable)"
        if tv is not None:
            assert tv(boxes, scores, args.iou).tolist() == nms(boxes, scores, args.iou).tolist()
            tv_ms = f"{median_ms(lambda: tv(boxes, scores, args.iou), args.repeat):.3f}"  # noqa: B023 (timed at once)
        print(f"| {n} | {len(result.keep)} | {ours:.3f} | {plain:.3f} | {loop:.2f} | {loop / ours:.1f}x | {tv_ms} |")
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
