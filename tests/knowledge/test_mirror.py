"""The embedded mirror: store build and reuse, and a real `oxigraph serve-read-only` on 127.0.0.1."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from reasonvqa.knowledge import queries
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.rdf_mapping import MAPPING_VERSION
from reasonvqa.knowledge.mirror import (MirrorError, build_store, mirror_cache_key, serve_mirror, shared_store,
                                        snapshot_date, snapshot_id)
from reasonvqa.knowledge.wikidata import WikidataClient, query_cache
from tests.knowledge.helpers import item_entity, statement, write_jsonl

DOG = item_entity("Q144", "dog", {"P8814": [statement("Q144", "P8814", "02086723-n")]})
CAR = item_entity("Q1420", "car", {"P8814": [statement("Q1420", "P8814", "02961779-n")]})


@pytest.fixture
def entities(tmp_path):
    folder = tmp_path / "entities"
    folder.mkdir()
    write_jsonl(folder / "objects.jsonl", [DOG, CAR])
    return folder


def test_snapshot_id_is_a_content_hash(entities):
    first = snapshot_id(entities)
    assert first.startswith("sha256:") and first == snapshot_id(entities)
    write_jsonl(entities / "objects.jsonl", [DOG])
    assert snapshot_id(entities) != first


def test_store_is_reused_while_entities_are_unchanged(entities, tmp_path):
    location = build_store(entities, tmp_path / "store")
    report = tmp_path / "store" / "build_report.json"
    built_at = report.stat().st_mtime_ns
    assert json.loads(report.read_text())["entities"] == 2

    assert build_store(entities, tmp_path / "store") == location
    assert report.stat().st_mtime_ns == built_at  # not rebuilt

    write_jsonl(entities / "objects.jsonl", [DOG])
    build_store(entities, tmp_path / "store")
    assert json.loads(report.read_text())["entities"] == 1


def test_the_shared_store_is_one_folder_per_content_built_once(entities, tmp_path):
    location = shared_store(entities, tmp_path / "cache")
    assert location.parent.parent == tmp_path / "cache" and location.parent.name.endswith("-mapping-" + MAPPING_VERSION)
    report = location.parent / "build_report.json"
    built_at = report.stat().st_mtime_ns
    assert json.loads(report.read_text())["entities"] == 2
    assert shared_store(entities, tmp_path / "cache") == location and report.stat().st_mtime_ns == built_at

    write_jsonl(entities / "objects.jsonl", [DOG])  # other content: its own folder, the first one kept
    other = shared_store(entities, tmp_path / "cache")
    assert other.parent != location.parent and json.loads((other.parent / "build_report.json").read_text())["entities"] == 1
    assert json.loads(report.read_text())["entities"] == 2
    with serve_mirror(entities, tmp_path / "new" / "work", location=location) as endpoint:  # a build's new work folder
        client = WikidataClient(endpoint, KnowledgeConfig(), None)
        assert client.select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")[0]["n"]["value"] != "0"
    assert (tmp_path / "new" / "work" / "knowledge_mirror.log").exists()
    assert not (tmp_path / "new" / "work" / "knowledge_mirror").exists()  # the store is the shared one


def test_without_a_writable_cache_there_is_no_shared_store(entities, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    assert shared_store(entities, tmp_path / "file" / "cache") is None


def test_no_usable_entity_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    with pytest.raises(MirrorError, match=r"no usable Wikidata entity .*bad.jsonl:1: malformed JSON"):
        build_store(bad, tmp_path / "store")


@pytest.mark.integration
def test_served_over_http_sparql_like_wikidata(entities, tmp_path):
    config = KnowledgeConfig()
    with serve_mirror(entities, tmp_path / "work") as endpoint:
        assert endpoint.startswith("http://127.0.0.1:") and endpoint.endswith("/query")
        client = WikidataClient(endpoint, config, cache=None)
        rows = client.select(queries.items_by_wordnet31(["02086723-n", "02961779-n"]))
        assert sorted(r["item"]["value"] for r in rows) == [
            "http://www.wikidata.org/entity/Q1420",
            "http://www.wikidata.org/entity/Q144",
        ]
        assert client.requests == 1
    with pytest.raises(urllib.error.URLError):  # stopped on exit
        urllib.request.urlopen(endpoint + "?query=ASK%7B%7D", timeout=2)


@pytest.mark.integration
def test_server_is_stopped_when_the_block_raises(entities, tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with serve_mirror(entities, tmp_path / "work") as endpoint:
            raise RuntimeError("boom")
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(endpoint + "?query=ASK%7B%7D", timeout=2)


@pytest.mark.integration
def test_unchanged_rebuild_makes_zero_requests(entities, tmp_path):
    """The mirror's port changes per build; its cache key (snapshot id) does not."""
    config = KnowledgeConfig()
    query = queries.items_by_wordnet31(["02086723-n"])
    counts = []
    for _ in range(2):
        with serve_mirror(entities, tmp_path / "work") as endpoint, query_cache(tmp_path / "cache", "link-00000") as cache:
            client = WikidataClient(endpoint, config, cache, cache_key=mirror_cache_key(entities))
            assert client.select(query)[0]["item"]["value"] == "http://www.wikidata.org/entity/Q144"
            counts.append((client.requests, client.cache_hits))
    assert counts == [(1, 0), (0, 1)]


def test_snapshot_date_is_the_newest_modified_date(tmp_path):
    from reasonvqa.paths import DATA_DIR

    assert snapshot_date(DATA_DIR / "knowledge" / "entities") == "2021-05-26"  # Q45.json's real `modified`
    undated = write_jsonl(tmp_path / "e.jsonl", [item_entity("Q1", "one", {})])
    assert snapshot_date(undated) is None
    dated = [dict(item_entity("Q1", "one", {}), modified="2024-02-01T10:00:00Z"),
             dict(item_entity("Q2", "two", {}), modified="2023-12-31T00:00:00Z")]
    assert snapshot_date(write_jsonl(tmp_path / "d.jsonl", dated)) == "2024-02-01"
