"""The Wikibase RDF mapping, checked through the pipeline's own queries on an in-process store."""

from __future__ import annotations

from reasonvqa.knowledge import queries
from reasonvqa.knowledge.mirror import write_ntriples
from tests.knowledge.helpers import in_process_client, item_entity, statement, time_statement, write_jsonl

WD = "http://www.wikidata.org/entity/"

# Modelled on the real Q45 (Portugal) statements: P36 Lisbon preferred, Coimbra normal with an end time.
PORTUGAL = item_entity(
    "Q45",
    "Portugal",
    {
        "P36": [statement("Q45", "P36", "Q597", "preferred"), statement("Q45", "P36", "Q45412", "normal", 1)],
        "P37": [statement("Q45", "P37", "Q5146"), statement("Q45", "P37", "Q13330", n=1)],
        "P38": [statement("Q45", "P38", "Q4916", "deprecated"), statement("Q45", "P38", "Q468474", n=1)],
        "P2046": [statement("Q45", "P2046", ("quantity", {"amount": "+92212", "unit": WD + "Q712226"}))],
        "P1082": [statement("Q45", "P1082", ("quantity", {"amount": "+10295909", "unit": "1"}))],
        "P571": [statement("Q45", "P571", ("time", {"time": "+1143-10-05T00:00:00Z", "precision": 11, "timezone": 0,
                                                     "calendarmodel": WD + "Q1985727"}))],
        "P6": [statement("Q45", "P6", None, snaktype="somevalue")],
        "P85": [statement("Q45", "P85", None, snaktype="novalue")],
        "P625": [statement("Q45", "P625", ("globecoordinate", {"latitude": 39.6, "longitude": -8.0, "globe": WD + "Q2"}))],
        "P373": [statement("Q45", "P373", "Portugal")],
    },
    sitelinks={"commonswiki": {"site": "commonswiki", "title": "Portugal", "badges": []}},
)
CATEGORY = item_entity(
    "Q7278710",
    "Category:Mount Everest",
    {"P301": [statement("Q7278710", "P301", "Q513")], "P31": [statement("Q7278710", "P31", "Q4167836")]},
    sitelinks={"commonswiki": {"site": "commonswiki", "title": "Category:Mount Everest", "badges": []}},
)


def _facts(client, qid, pids):
    rows = client.select(queries.best_rank_statements([qid], pids))
    return sorted((r["prop"]["value"].rsplit("/", 1)[1], r["v"]["value"].replace(WD, ""), r["rank"]["value"].split("#")[1]) for r in rows)


def test_best_rank_preferred_beats_normal(tmp_path):
    client = in_process_client(tmp_path, [PORTUGAL])
    assert _facts(client, "Q45", ["P36"]) == [("P36", "Q597", "PreferredRank")]


def test_all_normal_values_are_truthy(tmp_path):
    client = in_process_client(tmp_path, [PORTUGAL])
    assert _facts(client, "Q45", ["P37"]) == [("P37", "Q13330", "NormalRank"), ("P37", "Q5146", "NormalRank")]


def test_deprecated_is_never_truthy(tmp_path):
    client = in_process_client(tmp_path, [PORTUGAL])
    assert _facts(client, "Q45", ["P38"]) == [("P38", "Q468474", "NormalRank")]
    direct = client.select("SELECT ?v WHERE { <http://www.wikidata.org/entity/Q45> <http://www.wikidata.org/prop/direct/P38> ?v }")
    assert [r["v"]["value"] for r in direct] == [WD + "Q468474"]


def test_quantities_carry_amount_and_unit(tmp_path):
    client = in_process_client(tmp_path, [PORTUGAL])
    rows = {r["prop"]["value"]: r for r in client.select(queries.best_rank_statements(["Q45"], ["P2046", "P1082"]))}
    area, population = rows[WD + "P2046"], rows[WD + "P1082"]
    assert (area["amount"]["value"], area["unit"]["value"]) == ("92212", WD + "Q712226")
    assert (population["amount"]["value"], population["unit"]["value"]) == ("10295909", WD + "Q199")


def test_times_carry_precision(tmp_path):
    client = in_process_client(tmp_path, [PORTUGAL])
    (row,) = client.select(queries.best_rank_statements(["Q45"], ["P571"]))
    assert row["time"]["value"] == "1143-10-05T00:00:00Z"
    assert row["precision"]["value"] == "11"


def test_somevalue_and_novalue(tmp_path):
    client = in_process_client(tmp_path, [PORTUGAL])
    (some,) = client.select(queries.best_rank_statements(["Q45"], ["P6"]))
    assert "/.well-known/genid/" in some["v"]["value"]
    assert client.select(queries.best_rank_statements(["Q45"], ["P85"])) == []
    classes = client.select("SELECT ?t WHERE { <http://www.wikidata.org/entity/Q45> a ?t }")
    assert [r["t"]["value"] for r in classes] == ["http://www.wikidata.org/prop/novalue/P85"]


def test_labels_and_p373_and_commons_sitelinks(tmp_path):
    client = in_process_client(tmp_path, [PORTUGAL, CATEGORY])
    assert client.select(queries.labels(["Q45"]))[0]["label"] == {"type": "literal", "value": "Portugal", "xml:lang": "en"}
    (p373,) = client.select(queries.items_by_commons_category(["Portugal"]))
    assert p373["item"]["value"] == WD + "Q45"
    (sitelink,) = client.select(queries.items_by_commons_sitelink(["Category:Mount Everest"]))
    assert sitelink["holder"]["value"] == WD + "Q7278710" and sitelink["main"]["value"] == WD + "Q513"
    assert sitelink["holderClass"]["value"] == WD + "Q4167836"


def test_build_report_counts_and_skips(tmp_path):
    broken = item_entity("Q1", "x", {"P18": [statement("Q1", "P18", ("wikibase-lexeme", {"id": "L1"}))]})
    report = write_ntriples(write_jsonl(tmp_path / "e.jsonl", [PORTUGAL, broken]), tmp_path / "out.nt")
    assert report["entities"] == 2
    assert report["skipped"] == {"unsupported datatype wikibase-lexeme": 1}
    text = (tmp_path / "out.nt").read_text()
    assert '<http://www.wikidata.org/entity/Q45> <http://www.wikidata.org/prop/direct/P625> "Point(-8.0 39.6)"' in text


def test_bad_value_node_parts_skip_the_statement_not_the_build(tmp_path):
    gregorian = WD + "Q1985727"
    bad = {
        "P585": ("time", {"time": "+1900-01-01T00:00:00Z", "timezone": 0, "calendarmodel": gregorian}),  # no precision
        "P580": ("time", {"time": "+1900-01-01T00:00:00Z", "precision": "x", "timezone": 0, "calendarmodel": gregorian}),
        "P2048": ("quantity", {"amount": "+5", "unit": "Q11573"}),  # unit not an IRI
        "P2049": ("quantity", {"amount": "+5", "unit": "1", "upperBound": "lots"}),
    }
    entity = item_entity("Q1", "x", {pid: [statement("Q1", pid, value)] for pid, value in bad.items()}
                         | {"P2044": [statement("Q1", "P2044", ("quantity", {"amount": "+8848", "unit": WD + "Q11573"}))]})
    report = write_ntriples(write_jsonl(tmp_path / "e.jsonl", [entity]), tmp_path / "out.nt")
    assert report["skipped"] == {"invalid quantity value: ValueError": 2, "invalid time value: KeyError": 1,
                                 "invalid time value: ValueError": 1}
    assert report["truthy_triples"] == 1
    client = in_process_client(tmp_path, [entity])
    assert [r["prop"]["value"] for r in client.select(queries.best_rank_statements(["Q1"], [*bad, "P2044"]))] == [WD + "P2044"]


def test_bce_times_follow_xsd_11_like_wdqs(tmp_path):
    """WDQS writes years before the common era in XSD 1.1 (1 BCE = 0000) when the precision is a year or finer."""
    def when(time, precision, n):
        return time_statement("Q1", "P571", time, precision, n)

    entity = item_entity("Q1", "x", {"P571": [when("-0044-03-15T00:00:00Z", 11, 0), when("-0001-00-00T00:00:00Z", 9, 1),
                                              when("-0500-00-00T00:00:00Z", 7, 2), when("+0044-00-00T00:00:00Z", 9, 3)]})
    client = in_process_client(tmp_path, [entity])
    rows = client.select(queries.best_rank_statements(["Q1"], ["P571"]))
    assert sorted((r["time"]["value"], r["precision"]["value"]) for r in rows) == [
        ("-0043-03-15T00:00:00Z", "11"),  # 44 BC
        ("-0500-01-01T00:00:00Z", "7"),  # coarser than a year: not shifted (as Wikibase does)
        ("0000-01-01T00:00:00Z", "9"),  # 1 BC
        ("0044-01-01T00:00:00Z", "9"),
    ]
    assert sorted(r["v"]["value"] for r in rows)[0] == "-0043-03-15T00:00:00Z"  # the ps: value too
