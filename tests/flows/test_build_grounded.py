"""End to end: a build with VLM-written grounded questions (a replaying OpenAI-compatible server on
127.0.0.1), verified questions merged from a build-verified-qa file, and the build's kind filter."""

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from PIL import Image

from reasonvqa import schemas
from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from reasonvqa.flows.config import BuildConfig
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.sources import parse_config
from reasonvqa.stage import write_parquet
from reasonvqa.tasks.release.verify import verify_release
from tests.tasks.verify.llm_server import FixtureLLM

pytestmark = pytest.mark.integration

REPLIES = {
    'task type "counting"': json.dumps({"qa": [
        {"question": "How many of the listed objects is R1?", "answer": "1", "region_ids": ["R1"]},
        {"question": "How many objects are R1 and R2 together?", "answer": "5", "region_ids": ["R1", "R2"]},
    ]}),
    "hallucination-based": json.dumps({"qa": [
        {"question": "How many zebras graze here?", "answer": "There are no zebras.", "task_type": "counting",
         "absent": "zebra", "region_ids": []},
    ]}),
}


def write_vg_images(root: Path) -> None:
    """Noise pictures at the sample's declared sizes and paths (the sample ships no pixels)."""
    for n, image in enumerate(json.loads((SAMPLE_DIR / "vg" / "image_data.json").read_text())[:5]):  # vlm_config reads 5
        path = root / image["url"].rstrip("/").split("/")[-2] / f"{image['image_id']}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.random.default_rng(n).integers(0, 255, (64, 80, 3), dtype=np.uint8)).save(path)


@pytest.fixture(scope="module")
def vlm_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm-build")
    write_vlm_inputs(root)
    with FixtureLLM(generations=REPLIES) as server:
        release = Path(build_reasonvqa(vlm_config(root, server.base_url), str(root / "out")))
    return release, next((root / "out" / ".work").iterdir())


def write_vlm_inputs(root: Path) -> None:
    """The VG images (noise) and a build-verified-qa file of one question under ``root``."""
    write_vg_images(root / "images")
    verified = schemas.from_rows([dict(
        question_id="f" * 20, image_id="vg:1", image_source="vg", question="What is the man wearing?", answer="a shirt",
        answer_category="free_form", kind="verified", task_type="free_form", is_hallucination=False,
        generator_model="fixture", program="def verify(sg):\n    return 'a shirt'", evidence_object_ids=["vg:1/o1058511"])],
        schemas.QUESTIONS)
    write_parquet(verified, root / "verified.parquet")


def vlm_config(root: Path, base_url: str) -> BuildConfig:
    """The sample's VG with VLM-written grounded questions from ``base_url`` and the verified file in ``root``."""
    return BuildConfig(
        # the first five images (the fixture replies' counts are per image; the sample holds 50)
        sources=[parse_config({"kind": "vg", "path": SAMPLE_DIR / "vg", "max_images": 5})],
        verified_questions=root / "verified.parquet",
        grounded={"vlm": {"llm": {"base_url": base_url, "model": "fixture-vlm", "max_retries": 1,
                                  "backoff_seconds": 0.01},
                          "image_roots": {"vg": root / "images"}, "task_types": ["counting"],
                          "near_duplicate_threshold": None}},
        select={"kinds": ["grounded_vlm", "verified", "grounded"]},
        balance={"hop_shares": None}, split={"drop_test_pairs_seen_in_train": False},
        release={"name": "vlm", "version": "1.0.0"},
    )


def test_vlm_questions_pass_the_filters_and_reach_the_release(vlm_build):
    release, work = vlm_build
    assert verify_release(release) == []
    report = json.loads((work / "run_report.json").read_text())
    vlm = report["grounded_vlm"]
    assert vlm["rows_in"] == vlm["rows_out"] + sum(vlm["rejected"].values())
    assert vlm["rejected"]["count_mismatch"] == 5  # one per image: "5" objects over two regions
    assert vlm["rows_out"] == 10  # per image: the one-region count and the zebra
    pool = pl.read_parquet(release / "pool" / "*.parquet")
    assert set(pool["kind"]) == {"grounded", "grounded_vlm", "verified"}  # templates filtered out by select
    zebra = pool.filter(pl.col("question") == "How many zebras graze here?")
    assert zebra.height == 5 and zebra["is_hallucination"].all() and (zebra["evidence_region_ids"].list.len() == 0).all()
    manifest = json.loads((release / "manifest.json").read_text())
    assert {"prompt:grounded_vqa", "prompt:grounded_negatives", "verified_questions"} <= set(manifest["inputs"])
    assert manifest["config"]["select"]["kinds"] == ["grounded_vlm", "verified", "grounded"]
