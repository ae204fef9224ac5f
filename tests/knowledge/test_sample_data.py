"""The bundled sample knowledge and GLDv2 sample are consistent with each other and with their sources."""

from __future__ import annotations

import csv

import pytest
import yaml

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.entity_dump import read_entities
from reasonvqa.knowledge.ids import is_qid
from reasonvqa.knowledge.linking import link_objects
from reasonvqa.knowledge.lookups import normalize_category
from reasonvqa.knowledge.sample_data import ENTITIES_DIR, TRANSCRIBED_YAML, transcribed_entities, write_jsonl
from reasonvqa import schemas
from reasonvqa.paths import SAMPLE_DIR


@pytest.fixture(scope="module")
def bundled():
    return read_entities(ENTITIES_DIR)


def test_transcribed_jsonl_is_generated_from_the_yaml(tmp_path):
    write_jsonl(transcribed_entities(), tmp_path / "transcribed.jsonl")
    assert (tmp_path / "transcribed.jsonl").read_bytes() == (ENTITIES_DIR / "transcribed.jsonl").read_bytes()


def test_every_transcribed_entity_says_why_its_qid_is_right():
    spec = yaml.safe_load(TRANSCRIBED_YAML.read_text())
    assert all(entry.get("qid_basis") and entry.get("label") for entry in spec.values())


def test_every_transcribed_item_value_has_an_english_label(bundled):
    entities = bundled.entities
    missing = set()
    for entity in transcribed_entities():
        for statements in entity["claims"].values():
            for st in statements:
                value = st["mainsnak"]["datavalue"]["value"]
                if isinstance(value, dict) and is_qid(value.get("id")):
                    if "en" not in entities.get(value["id"], {}).get("labels", {}):
                        missing.add(value["id"])
    assert missing == set()


def test_bundled_entities_read_without_problems(bundled):
    assert bundled.problems == []
    assert {"Q45", "Q513", "Q144", "Q8004", "Q1420", "Q243"} <= set(bundled.entities)


def test_gldv2_sample_links_as_documented(bundled_client):
    with open(SAMPLE_DIR / "gldv2" / "train_label_to_category.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert all(r["category"].startswith("http://commons.wikimedia.org/wiki/Category:") for r in rows)
    names = {r["landmark_id"]: normalize_category(r["category"].split("/wiki/", 1)[1]) for r in rows}
    assert names == {"11": "Mount Everest", "27": "Eiffel Tower", "42": "Lisbon", "58": "Chichén Itzá"}

    objects = schemas.from_rows(
        [{"object_id": f"gldv2:{lid}/o0", "image_id": f"gldv2:{lid}", "commons_category": n} for lid, n in names.items()],
        schemas.OBJECTS,
    )
    result = link_objects(objects, bundled_client, KnowledgeConfig(wordnet_source="table"), 0)
    linked = {r["object_id"]: (r["qid"], r["method"]) for r in result.outputs["entity_links"].to_pylist()}
    assert linked == {
        "gldv2:11/o0": ("Q513", "commons:sitelink-p301"),
        "gldv2:27/o0": ("Q243", "commons:p373"),
        "gldv2:42/o0": ("Q597", "commons:p373"),
    }
    assert [r["reason"] for r in result.rejects.rows] == ["commons_category_not_found"]  # Chichén Itzá, on purpose


def test_gldv2_clean_list_is_a_subset_of_train():
    with open(SAMPLE_DIR / "gldv2" / "train.csv", newline="") as handle:
        train = {r["id"]: r["landmark_id"] for r in csv.DictReader(handle)}
    with open(SAMPLE_DIR / "gldv2" / "train_clean.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            for image in row["images"].split():
                assert train[image] == row["landmark_id"]
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in train)
