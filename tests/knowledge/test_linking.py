"""Linking objects to items against the bundled sample knowledge (in-process Oxigraph, same queries)."""

from __future__ import annotations

import math

import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.linking import link_objects, link_synset_names
from reasonvqa.knowledge.wordnet import TableWordNet
from reasonvqa import schemas
from reasonvqa.stage import write_shard

CONFIG = KnowledgeConfig(wordnet_source="table")


def _objects(rows: list[dict]):
    full = []
    for n, row in enumerate(rows):
        image = row.pop("image_id", "vg:1")
        full.append({"object_id": f"{image}/o{n}", "image_id": image, "origin": "annotation:vg", **row})
    return schemas.from_rows(full, schemas.OBJECTS)


@pytest.fixture(scope="module")
def wordnet():
    return TableWordNet(CONFIG.wordnet_table)


def test_done_when_synsets_link_offline(bundled_store):
    rows = link_synset_names(["dog.n.01", "traffic_light.n.01", "car.n.01"], CONFIG, store_dir=bundled_store.parent)
    assert [(r["name"], r["wn30_offset"], r["wn31_offset"], r["qid"], r["method"]) for r in rows] == [
        ("dog.n.01", "02084071-n", "02086723-n", "Q144", "wordnet:p8814"),
        ("traffic_light.n.01", "06874185-n", "06887235-n", "Q8004", "wordnet:p8814"),
        ("car.n.01", "02958343-n", "02961779-n", "Q1420", "wordnet:p8814"),
    ]


@pytest.mark.integration
def test_cli_on_an_endpoint_keeps_its_answers_in_the_cache_folder(bundled_store, tmp_path):
    from reasonvqa.knowledge.mirror import serve_mirror

    with serve_mirror(CONFIG.mirror_entities, bundled_store.parent.parent) as endpoint:
        config = CONFIG.model_copy(update={"endpoint": endpoint, "cache_dir": tmp_path / "cache"})
        served = link_synset_names(["dog.n.01"], config)
    assert (tmp_path / "cache" / "link-synset-names.jsonl").exists()
    cached = link_synset_names(["dog.n.01"], config)  # the endpoint is gone: every answer comes from the file
    assert [(r["qid"], r["label"]) for r in cached] == [(r["qid"], r["label"]) for r in served] == [("Q144", "dog")]


def test_cli_rows_explain_failures(bundled_client):
    rows = link_synset_names(["bad name", "blorp.n.01", "color.n.04", "area.n.01"], CONFIG, client=bundled_client)
    assert [(r["name"], r["qid"], r["reason"]) for r in rows] == [
        ("bad name", None, "malformed_synset"),
        ("blorp.n.01", None, "synset_not_in_wordnet30"),
        ("color.n.04", None, "no_wordnet31_counterpart"),  # a Visual Genome synset dropped in WordNet 3.1
        ("area.n.01", None, "no_wikidata_item"),
    ]


def test_link_objects_every_object_linked_or_rejected(bundled_client, wordnet, tmp_path):
    objects = _objects(
        [
            {"label": "car", "synset": "car.n.01"},
            {"label": "car", "synset": "car.n.01"},
            {"label": "teddy bear", "synset": "teddy.n.01"},
            {"label": "guy", "synset": "guy.n.01"},  # no P8814 item: hypernym man.n.01
            {"label": "colors", "synset": "color.n.04"},
            {"label": "area", "synset": "area.n.01"},
            {"label": "blorp", "synset": "blorp.n.01"},
            {"label": "thing", "synset": "thing"},
            {"label": "sky"},
            {"image_id": "gldv2:cb470fa127a95eef", "origin": "annotation:gldv2", "commons_category": "Mount Everest"},
            {"image_id": "gldv2:593ab7cdd2f58cd6", "origin": "annotation:gldv2", "commons_category": "Eiffel_Tower"},
            {"image_id": "gldv2:70f8cc6a09f4ba12", "origin": "annotation:gldv2", "commons_category": "Lisbon"},
            {"image_id": "gldv2:5b9abeaf01f8f1fb", "origin": "annotation:gldv2", "commons_category": "Chich%C3%A9n_Itz%C3%A1"},
            {"image_id": "gldv2:0000000000000001", "origin": "annotation:gldv2", "commons_category": 'X" } ?s ?p ?o . #'},
        ]
    )
    result = link_objects(objects, bundled_client, CONFIG, shard=3, wordnet=wordnet)

    links = {r["object_id"]: r for r in result.outputs["entity_links"].to_pylist()}
    assert {k: (v["qid"], v["method"], v["hypernym_depth"]) for k, v in links.items()} == {
        "vg:1/o0": ("Q1420", "wordnet:p8814", 0),
        "vg:1/o1": ("Q1420", "wordnet:p8814", 0),
        "vg:1/o2": ("Q213477", "wordnet:p8814", 0),
        "vg:1/o3": ("Q8441", "wordnet:p8814:hypernym", 1),
        "gldv2:cb470fa127a95eef/o9": ("Q513", "commons:sitelink-p301", 0),
        "gldv2:593ab7cdd2f58cd6/o10": ("Q243", "commons:p373", 0),
        "gldv2:70f8cc6a09f4ba12/o11": ("Q597", "commons:p373", 0),
    }
    car = links["vg:1/o0"]
    assert (car["label"], car["synset"], car["wn30_offset"], car["wn31_offset"]) == ("car", "car.n.01", "02958343-n", "02961779-n")
    assert links["gldv2:cb470fa127a95eef/o9"]["label"] == "Mount Everest"

    reasons = {r["source"].split("#")[1]: r["reason"] for r in result.rejects.rows}
    assert reasons == {
        "vg:1/o4": "no_wordnet31_counterpart",
        "vg:1/o5": "no_wikidata_item",
        "vg:1/o6": "synset_not_in_wordnet30",
        "vg:1/o7": "malformed_synset",
        "vg:1/o8": "no_synset",
        "gldv2:5b9abeaf01f8f1fb/o12": "commons_category_not_found",
        "gldv2:0000000000000001/o13": "malformed_commons_category",
    }
    assert result.rejects.rows[0]["source"].startswith("objects/part-00003.parquet#")
    assert result.rows_in == 14
    stats = write_shard(tmp_path / "linking", 3, result)  # the runner's accounting holds
    assert stats["rows_out"] == 7 and sum(stats["rejected"].values()) == 7
    assert stats["methods"] == {"commons:p373": 2, "commons:sitelink-p301": 1, "wordnet:p8814": 3, "wordnet:p8814:hypernym": 1}


def test_one_query_per_batch_not_per_object(bundled_client, wordnet):
    names = ["car.n.01", "tree.n.01", "building.n.01", "window.n.01", "wall.n.01"]
    objects = _objects([{"synset": n} for n in names for _ in range(4)])  # 20 objects, 5 synsets
    config = CONFIG.model_copy(update={"batch_size": 2, "hypernym_fallback": False})
    before = bundled_client.requests

    result = link_objects(objects, bundled_client, config, shard=0, wordnet=wordnet)

    assert result.outputs["entity_links"].num_rows == 20
    synset_queries = math.ceil(5 / 2)
    label_queries = math.ceil(5 / 2)  # five distinct items
    assert result.requests == bundled_client.requests - before == synset_queries + label_queries


def test_hypernym_depth_zero_disables_the_fallback(bundled_client, wordnet):
    objects = _objects([{"synset": "guy.n.01"}])
    result = link_objects(objects, bundled_client, CONFIG.model_copy(update={"max_hypernym_depth": 0}), 0, wordnet=wordnet)
    assert result.outputs["entity_links"].num_rows == 0
    assert [r["reason"] for r in result.rejects.rows] == ["no_wikidata_item"]


def test_links_are_deterministic(bundled_client, wordnet):
    objects = _objects([{"synset": "car.n.01"}, {"synset": "guy.n.01"}, {"synset": "man.n.01"}])
    first = link_objects(objects, bundled_client, CONFIG, 0, wordnet=wordnet).outputs["entity_links"]
    second = link_objects(objects, bundled_client, CONFIG, 0, wordnet=wordnet).outputs["entity_links"]
    assert first.equals(second)
