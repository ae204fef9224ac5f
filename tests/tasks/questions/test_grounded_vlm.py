"""VLM-written grounded questions against a real OpenAI-compatible HTTP server on 127.0.0.1 that
replays fixture replies (some good, some contradicting the regions, some broken), through the
checks and the filter cascade, with the real all-MiniLM-L6-v2 for near-duplicates."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from reasonvqa import schemas
from reasonvqa.stage_contract import instance, run_stage_shard
from reasonvqa.stage import read_table
from reasonvqa.tasks.questions.grounded_config import VLMConfig
from reasonvqa.tasks.questions.grounded_vlm import GroundedVLMStage, parse_count, region_listing
from reasonvqa.tasks.questions.regions import regions_by_image, shard_regions
from tests.tasks.questions.test_grounded import ATTRIBUTES, OBJECTS
from tests.tasks.verify.llm_server import FixtureLLM, images_of

pytestmark = pytest.mark.integration

IMAGES = schemas.from_rows([
    dict(image_id="vg:7", source="vg", source_image_id="7", width=800, height=600, file_path="7.jpg"),
    dict(image_id="vg:8", source="vg", source_image_id="8", width=800, height=600, file_path="8.jpg"),  # no file
], schemas.IMAGES)
REGIONS = shard_regions(pa.concat_tables([OBJECTS, schemas.from_rows([dict(
    object_id="vg:8/o1", image_id="vg:8", label="dog", names=["dog"], x=1.0, y=1.0, w=5.0, h=5.0, origin="annotation:vg")],
    schemas.OBJECTS)]), ATTRIBUTES)

# handles: R1 white car, R2 red car, R3 tree, R4 sign, R5 and R6 poles (region id order)
REPLIES = {
    'task type "counting"': json.dumps({"qa": [
        {"question": "How many cars are in the picture?", "answer": "2", "region_ids": ["R1", "R2"]},
        {"question": "How many poles stand on the right?", "answer": "three", "region_ids": ["R5", "R6"]},
        {"question": "How many trees are there?", "answer": "1", "region_ids": ["R9"]},
    ]}),
    'task type "spatial"': "Here you are:\n```json\n" + json.dumps({"qa": [
        {"question": "Is the white car to the left or to the right of the red car?", "answer": "It is on the left.",
         "region_ids": ["R1", "R2"]},
        {"question": "Is the tree to the left or to the right of the sign?", "answer": "right", "region_ids": ["R3", "R4"]},
        {"question": "Where is the sign?", "answer": "Above the red car.", "region_ids": []},
    ]}) + "\n```",
    'task type "identification"': json.dumps({"qa": [
        {"question": "What is the green object near the top?", "answer": "A tree.", "region_ids": ["R3"]},
        {"question": "What is the metal object?", "answer": "a lamp", "region_ids": ["R4"]},
        {"question": "What is the red object?", "answer": "A car.", "region_ids": ["R2"]},
        {"question": "What is the green thing near the top?", "answer": "A tree.", "region_ids": ["R3"]},
        {"question": 7, "answer": "car", "region_ids": ["R1"]},
    ]}),
    'task type "attribute"': '```json\n{"qa": [{"question": "What color is the tree?", "answer": "gr',
    'task type "comparison"': json.dumps({"qa": [
        {"question": "By the annotation, which is bigger, the tree or the sign?", "answer": "The tree.",
         "region_ids": ["R3", "R4"]},
        {"question": "Which is larger, the red car or the sign?", "answer": "The red car.", "region_ids": ["R2", "R4"]},
    ]}),
    'task type "ocr"': json.dumps({"qa": []}),
    "hallucination-based": json.dumps({"qa": [
        {"question": "How many dogs are sitting on the red car?", "answer": "There are no dogs.", "task_type": "counting",
         "absent": "dog", "region_ids": []},
        {"question": "What color are the tree's flowers?", "answer": "There is no such tree.", "task_type": "attribute",
         "absent": "tree", "region_ids": []},
        {"question": "Is the bus to the left of the white car?", "answer": "There is no bus.", "task_type": "spatial",
         "absent": "bus", "region_ids": ["R1"]},
    ]}),
}
VERDICTS = {"What is the red object?": "trivial"}


@pytest.fixture(scope="module")
def vlm_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlm")
    pixels = np.random.default_rng(7).integers(0, 255, (600, 800, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(root / "7.jpg")
    with FixtureLLM(generations=REPLIES, text_verdicts=VERDICTS) as server:
        config = VLMConfig(llm={"base_url": server.base_url, "model": "fixture-vlm", "api_key_env": "FIXTURE_KEY",
                                "max_retries": 1, "backoff_seconds": 0.01}, image_roots={"vg": root}, max_image_side=256)
        stage_dir = root / "grounded_vlm"
        stats = run_stage_shard(stage_dir, 0, instance(GroundedVLMStage, config),
                                {"images": IMAGES, "regions": REGIONS})
        requests = list(server.requests)
    return stats, read_table(stage_dir, "questions", schemas.QUESTIONS), read_table(stage_dir, "_rejects", schemas.REJECTS), requests


def test_each_prompt_attaches_the_image_and_lists_the_regions(vlm_run):
    _, _, _, requests = vlm_run
    generation = [r for r in requests if isinstance(r["messages"][0]["content"], list)]
    assert len(generation) == 7  # six task types + negatives, for the one image with a file
    urls = {url for r in generation for url in images_of(r)}
    assert len(urls) == 1 and next(iter(urls)).startswith("data:image/jpeg;base64,")
    text = generation[0]["messages"][0]["content"][0]["text"]
    assert "R1: car, box [50, 300, 100, 80]" in text and "R6: pole, box [701, 101, 10, 300]" in text


def test_grounded_qa_passes_the_checks_and_filters_with_counts_per_reason(vlm_run):
    stats, questions, rejects, _ = vlm_run
    assert stats["rows_in"] == stats["rows_out"] + sum(stats["rejected"].values())
    assert stats["rejected"] == {
        "image_unavailable": 1, "count_mismatch": 1, "unknown_region": 1, "geometry_mismatch": 1, "no_evidence": 1,
        "label_mismatch": 1, "judge_trivial": 1, "near_duplicate": 1, "malformed_candidate": 1, "llm_broken_json": 1,
        "taboo_word": 1, "not_absent": 1, "negative_with_evidence": 1}
    assert Counter(rejects["reason"].to_pylist()) == Counter(stats["rejected"])
    rows = {q["question"]: q for q in questions.to_pylist()}
    assert set(rows) == {"How many cars are in the picture?", "Is the white car to the left or to the right of the red car?",
                         "What is the green object near the top?", "Which is larger, the red car or the sign?",
                         "How many dogs are sitting on the red car?"}
    assert rows["How many cars are in the picture?"]["evidence_region_ids"] == ["vg:7/g1", "vg:7/g2"]
    dog = rows["How many dogs are sitting on the red car?"]
    assert dog["is_hallucination"] and dog["evidence_region_ids"] == [] and dog["task_type"] == "counting"
    assert dog["template_ids"] == ["hallucination:vlm_negative"]
    assert all(q["template_ids"] is None for q in rows.values() if not q["is_hallucination"])
    assert set(questions["kind"].to_pylist()) == {"grounded_vlm"}
    assert set(questions["generator_model"].to_pylist()) == {"fixture-vlm"}


def test_counts_and_geometry_of_kept_answers_hold(vlm_run):
    _, questions, _, _ = vlm_run
    regions = {r.region_id: r for rs in regions_by_image(REGIONS).values() for r in rs}
    for q in questions.to_pylist():
        if q["task_type"] == "counting" and not q["is_hallucination"]:
            assert parse_count(q["answer"]) == len(q["evidence_region_ids"])
        if q["task_type"] == "spatial":
            a, b = (regions[r] for r in q["evidence_region_ids"])
            assert ("left" in q["answer"].lower()) == (a.right < b.x)


def test_region_listing_puts_the_largest_first_within_the_limit():
    listing, handles = region_listing(regions_by_image(REGIONS)["vg:7"], 2)
    assert [r.region_id for r in handles.values()] == ["vg:7/g2", "vg:7/g3"]  # the two largest, in id order
    assert listing.splitlines()[0] == "R1: car, box [500, 320, 120, 90]"
    assert parse_count("There are three.") == 3 and parse_count("none") is None
