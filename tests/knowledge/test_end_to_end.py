"""Linking and facts for the bundled Visual Genome + GLDv2 samples over a real oxigraph HTTP server."""

from __future__ import annotations

import json
import math

import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.facts import fetch_facts
from reasonvqa.knowledge.linking import link_objects
from reasonvqa.knowledge.mirror import mirror_cache_key, serve_mirror
from reasonvqa.knowledge.wikidata import WikidataClient, query_cache
from reasonvqa import schemas
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.stage import read_table, run_shard

PROPERTIES = ["P17", "P19", "P27", "P30", "P31", "P35", "P36", "P37", "P38", "P47", "P61", "P106", "P138", "P279", "P569", "P2044"]


def _sample_objects():
    rows = []
    for image in json.loads((SAMPLE_DIR / "vg" / "objects.json").read_text()):
        image_id = f"vg:{image.get('image_id', image.get('id'))}"
        for obj in image["objects"]:
            synsets = obj.get("synsets") or []
            rows.append({"object_id": f"{image_id}/o{obj.get('object_id', obj.get('id'))}", "image_id": image_id,
                         "synset": synsets[0] if synsets else None, "synsets": synsets})
    for name in ("Mount Everest", "Eiffel Tower", "Lisbon", "Chichén Itzá"):
        rows.append({"object_id": f"gldv2:{name}/o0", "image_id": f"gldv2:{name}", "commons_category": name})
    return schemas.from_rows(rows, schemas.OBJECTS)


@pytest.mark.integration
def test_sample_images_to_three_hop_facts(bundled_store, tmp_path):
    work = bundled_store.parent.parent  # serve_mirror reuses the session's build
    config = KnowledgeConfig(wordnet_source="table")
    entities = config.mirror_entities
    objects = _sample_objects()
    with serve_mirror(entities, work) as endpoint, query_cache(tmp_path / "cache", "shard-00000") as cache:
        client = WikidataClient(endpoint, config, cache, cache_key=mirror_cache_key(entities))
        link_stats = run_shard(tmp_path / "linking", 0, lambda: link_objects(objects, client, config, 0))
        links = read_table(tmp_path / "linking", "entity_links")
        qids = sorted(set(links.column("qid").to_pylist()))
        fact_stats = run_shard(tmp_path / "facts", 0, lambda: fetch_facts(qids, client, config, PROPERTIES, 0))

    assert link_stats["rows_in"] == objects.num_rows == link_stats["rows_out"] + sum(link_stats["rejected"].values())
    linked = dict(zip(links.column("object_id").to_pylist(), links.column("qid").to_pylist()))
    assert {linked[f"gldv2:{n}/o0"] for n in ("Mount Everest", "Eiffel Tower", "Lisbon")} == {"Q513", "Q243", "Q597"}
    assert {"Q1420", "Q11442", "Q10884", "Q41176", "Q213477"} <= set(qids)  # car, bicycle, tree, building, teddy bear
    # P8814, hypernyms, sitelink, P373, labels: batched (200 ids a query), not per object: the sample's 50 VG
    # images hold 1,555 objects of 401 synsets
    assert link_stats["requests"] <= 8

    facts = read_table(tmp_path / "facts", "facts")
    # hops 1-3 (4 would be the P279 chain above classes the hops did not ask about: none here)
    assert sorted(set(facts.column("hop").to_pylist())) == [1, 2, 3]
    # one query per batch of 200 subjects (hop 1: the 308 linked items, 2 queries), one per class-chain level,
    # one label query
    assert fact_stats["requests_by_hop"]["1"] == math.ceil(len(qids) / config.batch_size) == 2
    assert fact_stats["requests"] == 2 + 3 + fact_stats["requests_by_hop"]["classes"]
    rows = facts.to_pylist()
    assert ("Q213477", "P138", "Q33866", 1) in {(f["subject_qid"], f["property_id"], f["value_qid"], f["hop"]) for f in rows}
    assert ("Q30", "P36", "Q61", 3) in {(f["subject_qid"], f["property_id"], f["value_qid"], f["hop"]) for f in rows}
