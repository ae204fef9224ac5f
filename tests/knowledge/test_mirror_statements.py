"""Statements queries answered from the mirror's store by index look-ups: the SPARQL engine's exact bindings."""

from __future__ import annotations

import pytest

from reasonvqa.knowledge import queries
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.facts import fetch_facts
from reasonvqa.knowledge.mirror import InProcessClient, build_store, serve_mirror
from reasonvqa.knowledge.mirror_statements import StatementsClient, statements_query_ids
from reasonvqa.knowledge.recorded import canonical_answer
from reasonvqa.knowledge.stages import KnowledgeShardConfig, knowledge_client
from tests.knowledge.helpers import write_jsonl
from tests.knowledge.test_facts import ENTITIES, PROPS

WD = "http://www.wikidata.org/entity/"
XSD = "http://www.w3.org/2001/XMLSchema#"
WB = "http://wikiba.se/ontology#"
# two P585 qualifiers on one statement: SPARQL gives one row per qualifier value
TWO_POINTS = dict(ENTITIES[0]["claims"]["P1082"][0], id="Q100$pop2", qualifiers={"P585": [
    {"snaktype": "value", "property": "P585", "datatype": "time", "datavalue": {"type": "time", "value": {
        "time": f"+{year}-00-00T00:00:00Z", "precision": 9, "timezone": 0, "calendarmodel": WD + "Q1985727"}}}
    for year in (2010, 2020)]})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("statements")
    entities = [dict(ENTITIES[0], claims={**ENTITIES[0]["claims"], "P1082": [TWO_POINTS]}), *ENTITIES[1:]]
    return build_store(write_jsonl(folder / "entities.jsonl", entities), folder / "store")


class NoQueries:
    requests = cache_hits = 0

    def select(self, query):
        raise AssertionError("a statements query reached the endpoint")


def test_the_statements_query_gives_the_engines_exact_bindings(store):
    engine = InProcessClient.open(store)
    direct = StatementsClient(NoQueries(), store)
    qids = ["Q100", "Q200", "Q201", "Q300", "Q999999"]  # Q999999: not in the store
    for pids in (PROPS, ["P279"], ["P1082", "P2048", "P575"], ["P9999"]):
        query = queries.best_rank_statements(qids, pids)
        assert canonical_answer(direct.select(query)) == canonical_answer(engine.select(query))
    rows = direct.select(queries.best_rank_statements(["Q100"], ["P1082", "P2048", "P575"]))
    values = sorted((r["prop"]["value"][len(WD):], r["v"]["value"], r.get("unit", {}).get("value"),
                     r.get("precision", {}).get("value"), r.get("pit", {}).get("value")) for r in rows)
    assert values == [  # hand-derived from the entities: units, precision, both points in time
        ("P1082", "12", WD + "Q199", None, "2010-01-01T00:00:00Z"),
        ("P1082", "12", WD + "Q199", None, "2020-01-01T00:00:00Z"),
        ("P2048", "330", WD + "Q11573", None, None),
        ("P575", "1886-01-01T00:00:00Z", None, "9", None),
    ]
    assert {r["rank"]["value"] for r in rows} == {WB + "NormalRank"}
    assert direct.answered == 5 and direct.requests == 0  # nothing sent to the endpoint


def test_only_the_exact_statements_text_is_answered_from_the_store(store):
    query = queries.best_rank_statements(["Q100", "Q200"], ["P31", "P279"])
    assert statements_query_ids(query) == (["Q100", "Q200"], ["P31", "P279"])
    assert statements_query_ids(query.replace("?st a wikibase:BestRank", "?st a wikibase:Statement")) is None
    assert statements_query_ids(queries.labels(["Q100"])) is None
    engine = InProcessClient.open(store)
    client = StatementsClient(engine, store)
    assert client.select(queries.labels(["Q100"])) == engine.select(queries.labels(["Q100"]))
    assert client.answered == 0 and client.requests == engine.requests == 2


def test_facts_in_one_batch_equal_facts_per_entity(store):
    direct = StatementsClient(NoQueries(), store)
    engine = InProcessClient.open(store)
    items = ["Q100", "Q200", "Q201", "Q210"]
    batched = fetch_facts(items, StatementsClient(engine, store), KnowledgeConfig(), PROPS, 0)
    one_by_one = fetch_facts(items, StatementsClient(engine, store), KnowledgeConfig(batch_size=1), PROPS, 0)
    reference = fetch_facts(items, engine, KnowledgeConfig(batch_size=1), PROPS, 0)
    assert batched.outputs["facts"].equals(one_by_one.outputs["facts"])
    assert batched.outputs["facts"].equals(reference.outputs["facts"])
    assert batched.rejects.rows == reference.rejects.rows and batched.rows_in == reference.rows_in
    assert direct.answered == 0


def test_a_shard_on_the_mirror_this_process_serves_reads_its_store(store, tmp_path):
    config = KnowledgeShardConfig(knowledge=KnowledgeConfig(), endpoint="http://127.0.0.1:9/query", cache_dir=tmp_path)
    with knowledge_client(config, "facts-00000") as client:
        assert not isinstance(client, StatementsClient)  # not served here: plain HTTP
    with serve_mirror(tmp_path, tmp_path / "work", location=store) as endpoint:
        with knowledge_client(config.model_copy(update={"endpoint": endpoint}), "facts-00001") as client:
            assert isinstance(client, StatementsClient)
            facts = fetch_facts(["Q100"], client, KnowledgeConfig(), PROPS, 0)
            assert client.answered == 5 and client.client.requests == 1  # hops and class levels; labels by HTTP
    reference = fetch_facts(["Q100"], InProcessClient.open(store), KnowledgeConfig(), PROPS, 0)
    assert facts.outputs["facts"].equals(reference.outputs["facts"]) and facts.outputs["facts"].num_rows == 9
