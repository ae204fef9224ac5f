"""The mirror's store, triple by triple, from a literal dump in the Wikidata JSON-lines format; the dump streamed."""

from __future__ import annotations

import json
import tracemalloc

from pyoxigraph import RdfFormat, Store

from reasonvqa.knowledge import entity_dump
from reasonvqa.knowledge.mirror import build_store, write_ntriples

TIME = '"time":"{}","timezone":0,"before":0,"after":0,"precision":{},"calendarmodel":"http://www.wikidata.org/entity/Q1985727"'
DUMP = "\n".join([
    '{"type":"item","id":"Q1","labels":{"en":{"language":"en","value":"thing \\"A\\""},"de":{"language":"de","value":"Ding"}},'
    '"claims":{"P31":[{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item",'
    '"numeric-id":3,"id":"Q3"},"type":"wikibase-entityid"},"datatype":"wikibase-item"},"type":"statement","id":"Q1$A1",'
    '"rank":"preferred"},{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item",'
    '"numeric-id":2,"id":"Q2"},"type":"wikibase-entityid"},"datatype":"wikibase-item"},"type":"statement","id":"Q1$A2",'
    '"rank":"normal"}],"P2048":[{"mainsnak":{"snaktype":"value","property":"P2048","datavalue":{"value":{"amount":"+12.5",'
    '"unit":"http://www.wikidata.org/entity/Q11573"},"type":"quantity"},"datatype":"quantity"},"type":"statement",'
    '"qualifiers":{"P585":[{"snaktype":"value","property":"P585","datavalue":{"value":{'
    + TIME.format("+2020-00-00T00:00:00Z", 9) + '},"type":"time"},"datatype":"time"}]},"id":"Q1$A3","rank":"normal"}]},'
    '"sitelinks":{}}',
    '{"type":"item","id":"Q2","labels":{"en":{"language":"en","value":"B"}},"claims":{"P571":[{"mainsnak":{"snaktype":"value",'
    '"property":"P571","datavalue":{"value":{' + TIME.format("+1889-03-31T00:00:00Z", 11) + '},"type":"time"},'
    '"datatype":"time"},"type":"statement","id":"Q2$B1","rank":"normal"}],"P31":[{"mainsnak":{"snaktype":"value",'
    '"property":"P31","datavalue":{"value":{"entity-type":"item","numeric-id":3,"id":"Q3"},"type":"wikibase-entityid"},'
    '"datatype":"wikibase-item"},"type":"statement","id":"Q2$B2","rank":"deprecated"}],"P2067":[{"mainsnak":{'
    '"snaktype":"somevalue","property":"P2067","datatype":"quantity"},"type":"statement","id":"Q2$B3","rank":"normal"}]},'
    '"sitelinks":{"commonswiki":{"site":"commonswiki","title":"Category:B b","badges":[]}}}',
    '{"type":"property","datatype":"wikibase-item","id":"P31","labels":{"en":{"language":"en","value":"instance of"}},'
    '"claims":{}}',
]) + "\n"
PREFIXES = {"wd:": "http://www.wikidata.org/entity/", "wds:": "http://www.wikidata.org/entity/statement/",
            "wdv:": "http://www.wikidata.org/value/", "wdt:": "http://www.wikidata.org/prop/direct/",
            "psv:": "http://www.wikidata.org/prop/statement/value/", "ps:": "http://www.wikidata.org/prop/statement/",
            "pq:": "http://www.wikidata.org/prop/qualifier/", "wdno:": "http://www.wikidata.org/prop/novalue/",
            "p:": "http://www.wikidata.org/prop/", "wb:": "http://wikiba.se/ontology#", "schema:": "http://schema.org/",
            "genid:": "http://www.wikidata.org/.well-known/genid/", "a": "http://www.w3.org/1999/02/22-rdf-syntax-ns#type",
            "label": "http://www.w3.org/2000/01/rdf-schema#label", "xsd:": "http://www.w3.org/2001/XMLSchema#",
            "commons:": "https://commons.wikimedia.org/wiki/"}
Q = "wdv:e348c19ac20267f9b1f3ee5ad4acf6b4"  # md5 of the quantity value's sorted JSON (Wikibase names value nodes by hash)
T = "wdv:ee5c7c99573a3fe3864e398a794ec095"  # the time value's
EXPECTED = f"""
wd:Q1 label "thing \\"A\\""@en
wd:Q1 p:P31 wds:Q1-A1
wds:Q1-A1 a wb:Statement
wds:Q1-A1 wb:rank wb:PreferredRank
wds:Q1-A1 a wb:BestRank
wds:Q1-A1 ps:P31 wd:Q3
wd:Q1 wdt:P31 wd:Q3
wd:Q1 p:P31 wds:Q1-A2
wds:Q1-A2 a wb:Statement
wds:Q1-A2 wb:rank wb:NormalRank
wds:Q1-A2 ps:P31 wd:Q2
wd:Q1 p:P2048 wds:Q1-A3
wds:Q1-A3 a wb:Statement
wds:Q1-A3 wb:rank wb:NormalRank
wds:Q1-A3 a wb:BestRank
wds:Q1-A3 ps:P2048 "12.5"^^xsd:decimal
wd:Q1 wdt:P2048 "12.5"^^xsd:decimal
wds:Q1-A3 psv:P2048 {Q}
{Q} a wb:QuantityValue
{Q} wb:quantityAmount "12.5"^^xsd:decimal
{Q} wb:quantityUnit wd:Q11573
wds:Q1-A3 pq:P585 "2020-01-01T00:00:00Z"^^xsd:dateTime
wd:Q2 label "B"@en
wd:Q2 p:P31 wds:Q2-B2
wds:Q2-B2 a wb:Statement
wds:Q2-B2 wb:rank wb:DeprecatedRank
wds:Q2-B2 ps:P31 wd:Q3
wd:Q2 p:P571 wds:Q2-B1
wds:Q2-B1 a wb:Statement
wds:Q2-B1 wb:rank wb:NormalRank
wds:Q2-B1 a wb:BestRank
wds:Q2-B1 ps:P571 "1889-03-31T00:00:00Z"^^xsd:dateTime
wd:Q2 wdt:P571 "1889-03-31T00:00:00Z"^^xsd:dateTime
wds:Q2-B1 psv:P571 {T}
{T} a wb:TimeValue
{T} wb:timeValue "1889-03-31T00:00:00Z"^^xsd:dateTime
{T} wb:timePrecision "11"^^xsd:integer
{T} wb:timeTimezone "0"^^xsd:integer
{T} wb:timeCalendarModel wd:Q1985727
wd:Q2 p:P2067 wds:Q2-B3
wds:Q2-B3 a wb:Statement
wds:Q2-B3 wb:rank wb:NormalRank
wds:Q2-B3 a wb:BestRank
wds:Q2-B3 ps:P2067 genid:9225b09682f56aaa910e580e77395cc5
wd:Q2 wdt:P2067 genid:9225b09682f56aaa910e580e77395cc5
commons:Category:B_b schema:about wd:Q2
commons:Category:B_b schema:isPartOf https://commons.wikimedia.org/
commons:Category:B_b schema:name "Category:B b"@en
commons:Category:B_b schema:inLanguage "en"
commons:Category:B_b a schema:Article
wd:P31 label "instance of"@en
"""


def _declarations(pid: str, kind: str) -> str:
    lines = [f"wd:{pid} a wb:Property", f"wd:{pid} wb:propertyType wb:{kind}"]
    for predicate, prefix in (("directClaim", "wdt:"), ("claim", "p:"), ("statementProperty", "ps:"),
                              ("statementValue", "psv:"), ("qualifier", "pq:"), ("novalue", "wdno:")):
        lines.append(f"wd:{pid} wb:{predicate} {prefix}{pid}")
    return "\n".join(lines)


def _term(text: str) -> str:
    if text.startswith('"'):
        value, _, suffix = text.rpartition('"')
        return value + '"' + (suffix.replace("xsd:", "^^<" + PREFIXES["xsd:"])[2:] + ">" if suffix.startswith("^^") else suffix)
    for prefix, iri in PREFIXES.items():
        if text == prefix or (prefix.endswith(":") and text.startswith(prefix)):
            return f"<{iri}{text[len(prefix):] if prefix.endswith(':') else ''}>"
    return f"<{text}>"


def _ntriples(text: str) -> list[str]:
    """Hand-written triples (prefixed names, one per line) as sorted N-Triples lines."""
    out = []
    for line in filter(None, text.strip().splitlines()):
        subject, predicate, rest = line.split(" ", 2)
        out.append(f"{_term(subject)} {_term(predicate)} {_term(rest)} .")
    return sorted(out)


def _store_lines(location) -> list[str]:
    store = Store.read_only(str(location))
    return sorted(store.dump(format=RdfFormat.N_QUADS).decode().splitlines())


def test_a_three_entity_dump_gives_exactly_these_triples(tmp_path):
    dump = tmp_path / "dump.jsonl"
    dump.write_text(DUMP)
    declared = [_declarations(*d) for d in (("P31", "WikibaseItem"), ("P571", "Time"), ("P2048", "Quantity"),
                                            ("P2067", "Quantity"))]
    expected = _ntriples(EXPECTED + "\n".join(declared))
    assert len(expected) == 83
    assert _store_lines(build_store(dump, tmp_path / "store")) == expected
    report = json.loads((tmp_path / "store" / "build_report.json").read_text())
    assert (report["entities"], report["statements"], report["truthy_triples"], report["properties"]) == (3, 6, 3, 4)


def test_a_repeated_entity_is_merged_as_one(tmp_path):
    # the same Q2 again with a preferred P31: merged, the deprecated statement stays, the new one is best
    again = json.loads(DUMP.splitlines()[1])
    again["claims"] = {"P31": [dict(again["claims"]["P31"][0], id="Q2$B4", rank="preferred")]}
    again["labels"] = {"en": {"language": "en", "value": "other label: the first one wins"}}
    dump = tmp_path / "dump.jsonl"
    dump.write_text(DUMP + json.dumps(again) + "\n")
    added = "wd:Q2 p:P31 wds:Q2-B4\nwds:Q2-B4 a wb:Statement\nwds:Q2-B4 wb:rank wb:PreferredRank\n" \
            "wds:Q2-B4 a wb:BestRank\nwds:Q2-B4 ps:P31 wd:Q3\nwd:Q2 wdt:P31 wd:Q3\n"
    declared = [_declarations(*d) for d in (("P31", "WikibaseItem"), ("P571", "Time"), ("P2048", "Quantity"),
                                            ("P2067", "Quantity"))]
    assert _store_lines(build_store(dump, tmp_path / "store")) == _ntriples(EXPECTED + added + "\n".join(declared))
    report = json.loads((tmp_path / "store" / "build_report.json").read_text())
    assert (report["entities"], report["statements"], report["truthy_triples"]) == (3, 7, 4)


def test_the_dump_is_streamed_not_held(tmp_path, monkeypatch):
    # 3,000 entities, ~1.4 MB of JSON lines, read through a 4 KiB buffer: every entity mapped, and the
    # mapping's peak Python memory far below the dump's size (only ids and block offsets are kept)
    monkeypatch.setattr(entity_dump, "READ_BUFFER", 4096)
    line = json.loads(DUMP.splitlines()[0])
    line["labels"]["en"]["value"] = "x" * 300
    with (tmp_path / "dump.jsonl").open("w") as handle:
        for n in range(3000):
            handle.write(json.dumps(dict(line, id=f"Q{n + 1}")) + "\n")
    size = (tmp_path / "dump.jsonl").stat().st_size
    assert size > 1_400_000
    tracemalloc.start()
    report = write_ntriples(tmp_path / "dump.jsonl", tmp_path / "out.nt")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert report["entities"] == 3000 and report["statements"] == 9000 and not report["problems"]
    assert peak < size / 3
    labels = [x for x in (tmp_path / "out.nt").read_text().splitlines() if "rdf-schema#label" in x]
    assert len(labels) == 3000
