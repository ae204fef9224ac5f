"""Benchmark of the proposals stage: its CPU work per image outside the model forward passes, and NMS.

    python -m benchmarks.bench_proposals stage [--images 8 --size 1024x768 --queries 64 --repeats 3]
    python -m benchmarks.bench_proposals nms [--sizes 100,900,5000] [--repeat 200]

``stage`` (issue 34): each run (a fresh interpreter, ``benchmarks/measure.py``) builds the random-weight
GroundingDINO (Swin-T backbone, 1+1 transformer layers, ``--queries`` queries) and SAM (1-block encoder
at 1024 px) of ``tasks/proposals/random_models.py``, writes ``--images`` JPEGs of ``--size``, runs the
shard once to warm up, then once measured through ``run_stage_shard`` (call cache, parquet writes
included) on one torch thread, zero thresholds and no filters (every query is a candidate, about 50
masks per image). The models' time is taken inside the run: GroundingDINO's forward passes and SAM's
``set_image`` and decoder calls (the work that runs on the model's device: on a GPU, the time the CPU
is free), and finding where the masks change value (on the device since issue 34). CPU work per image =
(wall time of the shard - that device time) / images: decoding, resizing,
tag prompts, classes, NMS, filters, mask encoding, rows and writes, the time a GPU would wait for.
The shard runs a third time with those timers on the main thread's CPU clock: ``cpu_work_cpu`` = the
main thread's CPU time outside the device work (the critical path, not inflated by a loaded machine's
waits for a core), and the loader threads' CPU time (overlapped with the models). ``device_wait_share``:
the wall-clock CPU work over the shard's wall time (on a GPU with ``--device cuda --forward real``:
the share of time the GPU waits; benchmarks/gpu_proposals_check.sh).

``nms``: NMS time for 100, 900 and 5000 boxes, numpy vs a straightforward loop vs torchvision.
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
import sys
import tempfile
import time
import types
from pathlib import Path

for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import numpy as np  # noqa: E402

from benchmarks import measure  # noqa: E402
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


LABELS = ["person", "man", "car", "dog", "cat", "tree", "bus", "window", "building", "sign", "table", "chair"]


def write_images(root: Path, count: int, width: int, height: int) -> tuple[list[dict], list[dict]]:
    """``count`` JPEGs of smooth gradients with a few filled shapes (photo-like to the JPEG codec), and
    their IMAGES and OBJECTS rows (four to six labels each)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(0)
    images, objects = [], []
    y, x = np.mgrid[0:height, 0:width]
    for n in range(count):
        base = np.stack([(x * rng.uniform(0.1, 0.3) + y * rng.uniform(0.1, 0.3) + rng.uniform(0, 255)) % 256
                         for _ in range(3)], axis=-1).astype(np.uint8)
        picture = Image.fromarray(base)
        draw = ImageDraw.Draw(picture)
        for _ in range(12):
            x0, y0 = rng.uniform(0, width), rng.uniform(0, height)
            draw.rectangle([x0, y0, x0 + rng.uniform(20, 300), y0 + rng.uniform(20, 300)],
                           fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
        picture.save(root / f"{n}.jpg", quality=90)
        images.append({"image_id": f"b:{n}", "source": "b", "file_path": f"{n}.jpg"})
        labels = rng.choice(LABELS, size=int(rng.integers(4, 7)), replace=False)
        objects += [{"object_id": f"b:{n}/o{k}", "image_id": f"b:{n}", "label": str(label)} for k, label in enumerate(labels)]
    return images, objects


def replay_forwards(stage, masks: int) -> None:
    """Replace the models' forward passes (never anything around them) by outputs of their real shapes:
    GroundingDINO's ``(B, queries, 256)`` token logits (seeded noise) and ``(B, queries, 4)`` boxes on a
    grid of ``masks`` cells that class-count NMS keeps; SAM's image embedding ``(1, 256, 64, 64)`` and,
    for each box prompt, mask logits ``(B, 1, H, W)`` of an ellipse inside the box with its IoU."""
    import torch

    columns = int(np.ceil(np.sqrt(masks * 4 / 3)))
    rows = int(np.ceil(masks / columns))
    cells = [((c + 0.5) / columns, (r + 0.5) / rows) for r in range(rows) for c in range(columns)][:masks]
    grid = torch.tensor([[cx, cy, 0.8 / columns, 0.8 / rows] for cx, cy in cells], dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)

    def detector(samples, captions):  # GroundingDINO's forward: outputs of one (image, caption) batch
        batch = len(captions)
        return {"pred_logits": torch.randn(batch, masks, 256, generator=generator) * 2,
                "pred_boxes": grid.expand(batch, masks, 4).clone()}

    predictor = stage.segmenter.predictor

    class ZeroEmbedding(torch.nn.Module):  # SAM's image encoder: the (1, 256, 64, 64) embedding
        img_size = predictor.model.image_encoder.img_size

        def forward(self, image):
            return torch.zeros(image.shape[0], 256, 64, 64)

    def predict_torch(point_coords, point_labels, boxes, multimask_output, return_logits):
        height, width = predictor.original_size
        xyxy = boxes * (max(height, width) / predictor.transform.target_length)  # back to image pixels
        y = torch.arange(height, dtype=torch.float32).view(1, height, 1) + 0.5
        x = torch.arange(width, dtype=torch.float32).view(1, 1, width) + 0.5
        cx, cy = [(xyxy[:, k] + xyxy[:, k + 2]).view(-1, 1, 1) / 2 for k in (0, 1)]
        rx, ry = [(xyxy[:, k + 2] - xyxy[:, k]).clamp(min=1).view(-1, 1, 1) / 2 for k in (0, 1)]
        logits = 4 * (1 - ((x - cx) / rx) ** 2 - ((y - cy) / ry) ** 2)
        return logits[:, None], torch.full((len(boxes), 1), 0.9), None

    stage.detector.model = detector
    predictor.model.image_encoder = ZeroEmbedding()
    predictor.predict_torch = predict_torch


def stage_child(args: argparse.Namespace) -> None:
    """One measured shard (see the module docstring); prints its figures as JSON."""
    from reasonvqa.torchvision_cpu import prepare

    prepare()
    import pyarrow as pa
    import torch

    from reasonvqa import schemas
    from reasonvqa.stage_contract import run_stage_shard
    from reasonvqa.tasks.proposals.random_models import register_tiny_sam, tiny_proposals_config
    from reasonvqa.tasks.proposals.stage import ProposalsStage

    torch.set_num_threads(1)
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="bench-proposals-") as tmp:
        root = Path(tmp)
        config = tiny_proposals_config(root / "models", num_queries=args.queries, min_class_instances=1,
                                       max_area_fraction=1.0)
        config.detector.image_size, config.detector.max_size = args.detector_size, args.detector_max_size
        config.images_per_call = args.images_per_call
        config.device = args.device
        config.segmenter.batch_size = 64  # type: ignore[union-attr]  # the config's default: one decoder call per image
        (root / "images").mkdir()
        images, objects = write_images(root / "images", args.images, width, height)
        shard = {"images": schemas.from_rows(images, schemas.IMAGES), "objects": schemas.from_rows(objects, schemas.OBJECTS),
                 "root": pa.table({"root": [str(root / "images")]})}
        register_tiny_sam()
        stage = ProposalsStage(config)
        stage.setup()
        if args.forward == "replay":
            replay_forwards(stage, args.masks)
        run_stage_shard(root / "warm", 0, stage, shard)  # first-call allocations, lazy imports
        stage.detector.forward_seconds = stage.segmenter.forward_seconds = 0.0  # type: ignore[union-attr]
        stage.segmenter.mask_runs_seconds = 0.0  # type: ignore[union-attr]
        cpu = time.process_time()
        start = time.perf_counter()
        stats = run_stage_shard(root / "measured", 0, stage, shard)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        gdino, sam = stage.detector.forward_seconds, stage.segmenter.forward_seconds  # type: ignore[union-attr]
        runs = getattr(stage.segmenter, "mask_runs_seconds", 0.0)  # masks' run changes found on the device (c2b1cfe: none)
        # the same shard again with the stage's timers on this thread's CPU clock: the critical path's CPU
        # time, which a loaded machine does not inflate (wall time there includes waiting for a core)
        clocks = [sys.modules[f"reasonvqa.tasks.proposals.{name}"] for name in ("detector", "masks")]
        for module in clocks:
            module.time = types.SimpleNamespace(perf_counter=time.thread_time)  # type: ignore[attr-defined]
        stage.detector.forward_seconds = stage.segmenter.forward_seconds = 0.0  # type: ignore[union-attr]
        stage.segmenter.mask_runs_seconds = 0.0  # type: ignore[union-attr]
        main_cpu, all_cpu = time.thread_time(), time.process_time()
        run_stage_shard(root / "measured-cpu", 0, stage, shard)
        main_cpu, all_cpu = time.thread_time() - main_cpu, time.process_time() - all_cpu
        device_cpu = (stage.detector.forward_seconds + stage.segmenter.forward_seconds  # type: ignore[union-attr]
                      + getattr(stage.segmenter, "mask_runs_seconds", 0.0))
    per_image = 1000 / args.images
    measure.child_result({
        "images": args.images, "size": args.size, "forward": args.forward, "masks_per_image": stats["regions"] / args.images,
        "candidates_per_image": stats["candidates"] / args.images,
        "wall_ms_per_image": wall * per_image, "process_cpu_ms_per_image": cpu * per_image,
        "gdino_forward_ms_per_image": gdino * per_image, "sam_forward_ms_per_image": sam * per_image,
        "mask_runs_on_device_ms_per_image": runs * per_image,
        "cpu_work_ms_per_image": (wall - gdino - sam - runs) * per_image,
        "cpu_work_cpu_ms_per_image": (main_cpu - device_cpu) * per_image,
        "device_wait_share": (wall - gdino - sam - runs) / wall,
        "loader_threads_cpu_ms_per_image": (all_cpu - main_cpu) * per_image,
    })


def stage_main(args: argparse.Namespace, child_args: list[str]) -> None:
    result = measure.measure_workload("benchmarks.bench_proposals", ["stage", *child_args], args,
                                      "proposals stage, CPU work per image outside the model forward passes")
    print(f"\nper image (median of {args.repeats} runs; {args.images} images of {args.size}, one torch thread)")
    for label in result["medians"]:
        figures = [r["result"] for r in result["runs"] if r["label"] == label]
        print(f"\n{label}\n| figure | median |\n|---|---:|")
        for key in ("masks_per_image", "candidates_per_image", "wall_ms_per_image", "gdino_forward_ms_per_image",
                    "sam_forward_ms_per_image", "mask_runs_on_device_ms_per_image", "cpu_work_ms_per_image",
                    "cpu_work_cpu_ms_per_image", "loader_threads_cpu_ms_per_image", "process_cpu_ms_per_image",
                    "device_wait_share"):
            print(f"| {key} | {statistics.median(f[key] for f in figures):.{3 if key == 'device_wait_share' else 1}f} |")
        for key in ("cpu_work_ms_per_image", "cpu_work_cpu_ms_per_image"):
            print(f"{key} of each run: " + ", ".join(f"{f[key]:.1f}" for f in figures))


def nms_main(args: argparse.Namespace) -> None:
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


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = measure.parser(__doc__.splitlines()[0])
    parser.add_argument("target", choices=["stage", "nms"], nargs="?", default="stage")
    parser.add_argument("--images", type=int, default=8, help="stage: images in the shard")
    parser.add_argument("--size", default="1024x768", help="stage: image width x height")
    parser.add_argument("--queries", type=int, default=64, help="stage, --forward real: GroundingDINO queries")
    parser.add_argument("--masks", type=int, default=50, help="stage, --forward replay: boxes (and masks) per image")
    parser.add_argument("--forward", choices=["replay", "real"], default="replay",
                        help="stage: the models' forward passes replaced by outputs of their shapes (default), or run")
    parser.add_argument("--device", default="cpu", help="stage: torch device of the models (cuda on a GPU machine)")
    parser.add_argument("--detector-size", type=int, default=800, help="stage: GroundingDINO's shorter side")
    parser.add_argument("--detector-max-size", type=int, default=1333)
    parser.add_argument("--images-per-call", type=int, default=4)
    parser.add_argument("--sizes", default="100,900,5000", help="nms: box counts")
    parser.add_argument("--repeat", type=int, default=200, help="nms: timed calls per size")
    parser.add_argument("--iou", type=float, default=0.5, help="nms: IoU threshold")
    args = parser.parse_args(argv)
    if args.target == "nms":
        nms_main(args)
    elif args.child:
        stage_child(args)
    else:
        child_args = [a for a in argv if a not in ("stage", "--child")]
        for option in ("--repeats", "--baseline", "--json"):  # the harness's own options stay here
            if option in child_args:
                at = child_args.index(option)
                del child_args[at:at + 2]
        stage_main(args, child_args)


if __name__ == "__main__":
    main()
