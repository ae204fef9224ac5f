"""End to end: the sample build with proposals enabled, random-weight GroundingDINO and SAM."""

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

pytest.importorskip("torch")
pytest.importorskip("groundingdino")
pytest.importorskip("segment_anything")

from reasonvqa.flows.config import BuildConfig  # noqa: E402
from reasonvqa.paths import SAMPLE_DIR  # noqa: E402
from reasonvqa.sources import parse_config  # noqa: E402
from reasonvqa.tasks.release.verify import verify_release  # noqa: E402

pytestmark = pytest.mark.integration


FIRST_VG_IMAGES = 5  # the models run on these only (random weights on CPU: 50 pictures would take minutes)


def first_vg_images(config: BuildConfig) -> BuildConfig:
    """``config`` with its Visual Genome source reading the first ``FIRST_VG_IMAGES`` images."""
    config.sources = [parse_config({"kind": "vg", "path": s.path, "max_images": FIRST_VG_IMAGES}) if s.kind == "vg" else s
                      for s in config.sources]
    return config


def write_sample_images(root: Path) -> None:
    """Noise pictures at the sample's declared sizes and paths (the sample ships no pixels), for the images
    that ``first_vg_images`` reads."""
    images = json.loads((SAMPLE_DIR / "vg" / "image_data.json").read_text())[:FIRST_VG_IMAGES]
    for n, image in enumerate(images):
        folder = image["url"].rstrip("/").split("/")[-2]
        path = root / folder / f"{image['image_id']}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        pixels = np.random.default_rng(n).integers(0, 255, (image["height"], image["width"], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path)


def test_sample_build_with_proposals_writes_regions_with_masks(proposals_build):
    _, release = proposals_build  # the sample with tiny_proposals_config over write_sample_images' pictures
    assert verify_release(release) == []
    manifest = json.loads((release / "manifest.json").read_text())
    regions = pq.read_table(release / "regions").to_pylist()
    assert manifest["counts"]["regions"] == len(regions) > 0
    # beside the sources' own regions (SA-1B, nuScenes, Visual Genome object boxes) the model's
    model = [r for r in regions if r["origin"].startswith("model:")]
    assert {r["image_id"].split(":")[0] for r in model} == {"vg"}  # only VG has an image root here
    assert all(r["mask"] is not None and r["origin"].startswith("model:grounding_dino+sam:") for r in model)
    stages = json.loads((release / "stats" / "stages.json").read_text())
    assert stages["proposals"]["rows_out"] == len(model)
    assert stages["proposals"]["rows_in"] == stages["proposals"]["rows_out"] + sum(stages["proposals"]["rejected"].values())
    assert manifest["config"]["proposals"]["enabled"] is True
