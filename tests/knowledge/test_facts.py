"""Multi-hop facts: ranks, units, precision, hops, rejects and batching."""

from __future__ import annotations

import math

import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.facts import fetch_facts
from reasonvqa.knowledge.ids import MalformedId
from reasonvqa.stage import write_shard
from tests.knowledge.helpers import in_process_client, item_entity, statement, time_statement

WD = "http://www.wikidata.org/entity/"
CONFIG = KnowledgeConfig()
PROPS = ["P279", "P186", "P2048", "P2067", "P1082", "P575", "P61", "P625", "P138", "P31"]


def _time(value: str, precision: int) -> tuple:
    return ("time", {"time": value, "precision": precision, "timezone": 0, "calendarmodel": WD + "Q1985727"})


ENTITIES = [
    item_entity(
        "Q100",
        "widget",
        {
            "P279": [statement("Q100", "P279", "Q200", "preferred"), statement("Q100", "P279", "Q201", n=1)],
            "P186": [statement("Q100", "P186", "Q300")],
            "P2048": [statement("Q100", "P2048", ("quantity", {"amount": "+330", "unit": WD + "Q11573"}))],
            "P2067": [statement("Q100", "P2067", ("quantity", {"amount": "+5", "unit": WD + "Q999"}))],
            "P1082": [dict(statement("Q100", "P1082", ("quantity", {"amount": "+12", "unit": "1"})), qualifiers={
                "P585": [{"snaktype": "value", "property": "P585", "datatype": "time",
                          "datavalue": {"type": "time", "value": _time("+2020-00-00T00:00:00Z", 9)[1]}}]})],
            "P575": [statement("Q100", "P575", _time("+1886-00-00T00:00:00Z", 9))],
            "P61": [statement("Q100", "P61", None, snaktype="somevalue")],
            "P625": [statement("Q100", "P625", ("globecoordinate", {"latitude": 1.0, "longitude": 2.0}))],
            "P138": [statement("Q100", "P138", "Q200"), statement("Q100", "P138", "Q200", n=1)],
            "P31": [statement("Q100", "P31", "Q400", "deprecated")],
        },
    ),
    item_entity("Q200", "gadget", {"P279": [statement("Q200", "P279", "Q210")]}),
    item_entity("Q201", "gizmo", {}),
    item_entity("Q210", "device", {"P279": [statement("Q210", "P279", "Q220")]}),
    item_entity("Q220", "object", {"P279": [statement("Q220", "P279", "Q230")]}),
    item_entity("Q230", "entity", {}),
    item_entity("Q300", None, {}),  # no English label
    item_entity("Q400", "thing", {}),
    item_entity("Q11573", "metre", {}),
]


@pytest.fixture
def client(tmp_path):
    return in_process_client(tmp_path, ENTITIES)


def _summary(result):
    out = []
    for f in result.outputs["facts"].to_pylist():
        value = f["value_label"] if f["value_type"] in ("item", "string") else (f["amount"], f["unit_label"]) if f["value_type"] == "quantity" else (f["time"], f["precision"])
        out.append((f["hop"], f["subject_label"], f["property_id"], value, f["rank"]))
    return out


def test_facts_over_three_hops(client, tmp_path):
    result = fetch_facts(["Q100"], client, CONFIG, PROPS, shard=2)

    assert _summary(result) == [
        (1, "widget", "P138", "gadget", "normal"),
        (1, "widget", "P186", None, "normal"),  # unlabeled: kept (it counts in the single-answer check)
        (1, "widget", "P279", "gadget", "preferred"),  # the normal-rank gizmo is not truthy
        (1, "widget", "P575", ("+1886-01-01T00:00:00Z", 9), "normal"),
        (1, "widget", "P1082", (12.0, None), "normal"),  # unit "1": no unit
        (1, "widget", "P2048", (330.0, "metre"), "normal"),
        (2, "gadget", "P279", "device", "normal"),
        (3, "device", "P279", "object", "normal"),
        (4, "object", "P279", "entity", "normal"),  # the class chain above the last hop (subject types need it)
    ]
    reasons = sorted(r["reason"] for r in result.rejects.rows)
    assert reasons == ["duplicate_value", "unit_without_label", "unknown_value", "unsupported_value_type"]
    assert result.rows_in == 13
    times = {f["property_id"]: f["point_in_time"] for f in result.outputs["facts"].to_pylist() if f["point_in_time"]}
    assert times == {"P1082": "+2020-01-01T00:00:00Z"}  # the P585 qualifier of the population statement
    stats = write_shard(tmp_path / "facts", 2, result)
    assert stats["rows_out"] == 9
    assert stats["requests_by_hop"] == {"1": 1, "2": 1, "3": 1, "classes": 2, "labels": 1}
    # hop 2 asks for gadget and for the unlabelled Q300 too: values are followed whatever their label
    assert stats["subjects_by_hop"] == {"1": 1, "2": 2, "3": 1}


def test_max_hops_bounds_the_walk(client):
    result = fetch_facts(["Q100"], client, CONFIG.model_copy(update={"max_hops": 1}), ["P279"], 0)
    # the hop stops at 1; the class chain above gadget is fetched (hop 2 = max_hops + 1)
    assert _summary(result) == [
        (1, "widget", "P279", "gadget", "preferred"),
        (2, "gadget", "P279", "device", "normal"),
        (2, "device", "P279", "object", "normal"),
        (2, "object", "P279", "entity", "normal"),
    ]
    assert result.requests == 2 + 4  # one hop query, four class levels (the last finds none), one label query


def test_malformed_ids_never_reach_a_query(client):
    result = fetch_facts(["Q100", "Q100 } ; DROP", "P31", ""], client, CONFIG, ["P279"], 2)
    assert sorted(r["reason"] for r in result.rejects.rows) == ["malformed_qid"] * 3
    assert result.rejects.rows[0]["source"] == "facts batch 2 of distinct linked items#qid='Q100 } ; DROP'"
    with pytest.raises(MalformedId):
        fetch_facts(["Q100"], client, CONFIG, ["P279 }"], 0)


def test_requests_are_batched_per_hop(tmp_path):
    # 7 items, each subclass of its own parent, parents subclass of one root: 7 -> 7 -> 1 subjects per hop
    entities = [item_entity("Q1", "root", {})]
    for n in range(7):
        parent, child = f"Q{100 + n}", f"Q{200 + n}"
        entities.append(item_entity(child, f"child {n}", {"P279": [statement(child, "P279", parent)]}))
        entities.append(item_entity(parent, f"parent {n}", {"P279": [statement(parent, "P279", "Q1")]}))
    client = in_process_client(tmp_path, entities)
    config = CONFIG.model_copy(update={"batch_size": 3})

    result = fetch_facts([f"Q{200 + n}" for n in range(7)], client, config, ["P279"], 0)

    expected = {"1": math.ceil(7 / 3), "2": math.ceil(7 / 3), "3": 1, "classes": 0, "labels": math.ceil(15 / 3)}
    assert result.extra["requests_by_hop"] == expected  # the root is asked at hop 3 (it has no facts)
    assert result.extra["subjects_by_hop"] == {"1": 7, "2": 7, "3": 1}
    assert result.outputs["facts"].num_rows == 14


def test_bundled_sample_three_hop_chain(bundled_client):
    result = fetch_facts(["Q213477"], bundled_client, CONFIG, ["P138", "P27", "P36"], 0)
    chain = [(f["hop"], f["subject_label"], f["property_id"], f["value_label"]) for f in result.outputs["facts"].to_pylist()]
    assert chain == [
        (1, "teddy bear", "P138", "Theodore Roosevelt"),
        (2, "Theodore Roosevelt", "P27", "United States"),
        (3, "United States", "P36", "Washington, D.C."),
    ]


def test_bundled_sample_respects_real_ranks(bundled_client):
    result = fetch_facts(["Q597", "Q513"], bundled_client, CONFIG, ["P17", "P36", "P38", "P1082", "P2044"], 0)
    facts = result.outputs["facts"].to_pylist()
    portugal = {(f["property_id"], f["value_label"] or f["amount"]) for f in facts if f["subject_qid"] == "Q45"}
    assert portugal == {("P17", "Portugal"), ("P36", "Lisbon"), ("P38", "euro"), ("P1082", 10295909.0)}
    (everest_height,) = [f for f in facts if f["subject_qid"] == "Q513" and f["property_id"] == "P2044"]
    assert (everest_height["amount"], everest_height["unit_label"], everest_height["rank"]) == (8848.86, "metre", "preferred")
    assert {f["value_label"] for f in facts if f["subject_qid"] == "Q513" and f["property_id"] == "P17"} == {
        "Nepal",
        "People's Republic of China",
    }


def test_outputs_do_not_depend_on_the_order_of_the_answer(sparql_server, fast_config):
    """WDQS gives no row order: two answers with the same rows in reverse order give the same facts and rejects."""
    import json

    from reasonvqa.knowledge.wikidata import WikidataClient
    from tests.knowledge.helpers import Reply

    def cell(value, datatype=None):
        if value.startswith("http"):
            return {"type": "uri", "value": value}
        return {"type": "literal", "value": value, **({"datatype": datatype} if datatype else {})}

    decimal, integer = "http://www.w3.org/2001/XMLSchema#decimal", "http://www.w3.org/2001/XMLSchema#integer"
    date = "http://www.w3.org/2001/XMLSchema#dateTime"
    normal = "http://wikiba.se/ontology#NormalRank"

    def height(unit):
        return {"s": cell(WD + "Q1"), "prop": cell(WD + "P2044"), "rank": cell(normal), "v": cell("300", decimal),
                "amount": cell("300", decimal), "unit": cell(WD + unit)}

    def inception(precision):
        return {"s": cell(WD + "Q1"), "prop": cell(WD + "P571"), "rank": cell(normal), "v": cell("1900-01-01T00:00:00Z", date),
                "time": cell("1900-01-01T00:00:00Z", date), "precision": cell(str(precision), integer)}

    unknown = [{"s": cell(WD + "Q1"), "prop": cell(WD + "P61"), "rank": cell(normal), "v": cell(f"{WD}.well-known/genid/{n}")}
               for n in ("a", "b")]
    statements = [height("Q11573"), height("Q3710"), inception(9), inception(8), *unknown]
    labels = [{"item": cell(WD + q), "label": {"type": "literal", "value": name, "xml:lang": "en"}}
              for q, name in (("Q1", "tower"), ("Q11573", "metre"), ("Q3710", "foot"))]

    def run(rows):
        body = json.dumps({"head": {"vars": sorted(rows[0])}, "results": {"bindings": rows}}).encode()
        labels_body = json.dumps({"head": {"vars": ["item", "label"]}, "results": {"bindings": labels}}).encode()
        sparql_server.script = [Reply(200, body), Reply(200, labels_body)]
        client = WikidataClient(sparql_server.url, fast_config, cache=None)
        result = fetch_facts(["Q1"], client, CONFIG, ["P2044", "P571", "P61"], 0)
        return result.outputs["facts"].to_pylist(), result.rejects.rows

    forward, backward = run(statements), run(statements[::-1])
    assert forward == backward
    assert [(f["unit_label"], f["precision"]) for f in forward[0]] == [(None, 8), (None, 9), ("foot", None), ("metre", None)]


def test_times_come_back_in_wikidata_json_years(tmp_path):
    """Facts carry times as Wikidata's JSON writes them (44 BC = -0044), whatever the endpoint's XSD 1.1 years."""
    def when(time, precision, n):
        return time_statement("Q1", "P571", time, precision, n)

    entity = item_entity("Q1", "forum", {"P571": [when("-0044-03-15T00:00:00Z", 11, 0), when("-0001-00-00T00:00:00Z", 9, 1),
                                                  when("-0500-00-00T00:00:00Z", 7, 2), when("+1886-00-00T00:00:00Z", 9, 3)]})
    result = fetch_facts(["Q1"], in_process_client(tmp_path, [entity]), CONFIG, ["P571"], 0)
    assert sorted((f["time"], f["precision"]) for f in result.outputs["facts"].to_pylist()) == [
        ("+1886-01-01T00:00:00Z", 9),
        ("-0001-01-01T00:00:00Z", 9),
        ("-0044-03-15T00:00:00Z", 11),
        ("-0500-01-01T00:00:00Z", 7),
    ]
