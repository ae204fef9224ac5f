"""Benchmark: per-image overhead of the proposals stage outside the model forward passes.

    python -m benchmarks.bench_proposals_stage [--images 8 --size 640x480 --detector-size 320]
    python -m benchmarks.bench_proposals_stage --device cuda --full-size --size 1024x768 \
        --detector-size 800 --detector-max-size 1333      # on a GPU machine

Runs ``ProposalsStage.process`` on one shard of noise images with the tests' random-weight
GroundingDINO (Swin-T backbone, 1+1 transformer layers, 30 queries) and SAM (1-block encoder
at 1024 px) on the CPU, zero thresholds (every query becomes a candidate). Forward time =
GroundingDINO forward passes + SAM ``set_image`` and mask decoder calls; overhead = the rest
of the shard (image decoding, tagging, prompts, class mapping, NMS, filters, RLE, rows,
call cache). Needs the ``vision`` extra; on the CPU test machines it applies the tests'
torchvision workaround first.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--detector-size", type=int, default=320)
    parser.add_argument("--detector-max-size", type=int, default=None)
    parser.add_argument("--box-threshold", type=float, default=0.0, help="0 (default): every query is a candidate")
    parser.add_argument("--text-threshold", type=float, default=0.0)
    parser.add_argument("--images-per-call", type=int, default=None, help="default: the tests' config (2)")
    parser.add_argument("--device", default="cpu", help="torch device of the models: cpu, cuda, ...")
    parser.add_argument("--full-size", action="store_true",
                        help="released model sizes (GroundingDINO-T, BERT-base, SAM ViT-H), random weights; for GPUs")
    args = parser.parse_args()
    from tests.torchvision_cpu import prepare

    prepare()
    import pyarrow as pa
    import torch
    from PIL import Image

    from reasonvqa import schemas
    from reasonvqa.model_stage import CallCache, ShardContext
    from reasonvqa.tasks.proposals.stage import ProposalsStage
    from tests.tasks.proposals.test_stage import tiny_proposals_config
    from tests.tasks.proposals.tiny_models import register_tiny_sam

    torch.set_num_threads(1)
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = tiny_proposals_config(root / "models", full_size=args.full_size, min_class_instances=1)
        config.detector.image_size = args.detector_size
        if args.detector_max_size:
            config.detector.max_size = args.detector_max_size
        config.detector.box_threshold, config.detector.text_threshold = args.box_threshold, args.text_threshold
        if args.images_per_call:
            config.images_per_call = args.images_per_call
        rng = np.random.default_rng(0)
        images, objects = [], []
        for n in range(args.images):
            Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(root / f"{n}.jpg")
            images.append({"image_id": f"b:{n}", "source": "b", "file_path": f"{n}.jpg"})
            objects += [{"object_id": f"b:{n}/o{k}", "image_id": f"b:{n}", "label": label}
                        for k, label in enumerate(["man", "dog", "car", "tree"])]
        shard = {"images": schemas.from_rows(images, schemas.IMAGES), "objects": schemas.from_rows(objects, schemas.OBJECTS),
                 "root": pa.table({"root": [str(root)]})}
        register_tiny_sam()
        config.device = args.device
        stage = ProposalsStage(config)
        stage.setup()
        stage.process(shard, ShardContext(0, CallCache(root / "warm.jsonl")))  # warm-up (first-call allocations)
        stage.detector.forward_seconds = stage.segmenter.forward_seconds = 0.0
        start = time.perf_counter()
        result = stage.process(shard, ShardContext(0, CallCache(root / "calls.jsonl")))
        total = time.perf_counter() - start
    forward = stage.detector.forward_seconds + stage.segmenter.forward_seconds
    per_image = 1000 / args.images
    sizes = "released" if args.full_size else "tiny"
    print(f"device {args.device}, {sizes} model sizes: images {args.images} at {width}x{height}, "
          f"detector short side {args.detector_size}; "
          f"regions {result.outputs['regions'].num_rows}, candidates {result.extra['candidates']}")
    print("| per image | ms |\n|---|---|")
    print(f"| GroundingDINO forward | {stage.detector.forward_seconds * per_image:.1f} |")
    print(f"| SAM set_image + decoder | {stage.segmenter.forward_seconds * per_image:.1f} |")
    print(f"| everything else (overhead) | {(total - forward) * per_image:.1f} |")
    print(f"| overhead / forward | {(total - forward) / forward:.1%} |")


if __name__ == "__main__":
    main()
