"""Wikidata JSON entities -> RDF triples, following the Wikibase RDF mapping for what the pipeline queries.

Emitted per item (https://www.mediawiki.org/wiki/Wikibase/Indexing/RDF_Dump_Format):
- ``rdfs:label`` in the requested languages;
- truthy ``wdt:`` triples for best-rank statements only (preferred if the property has
  any preferred statement, else normal; deprecated never);
- statement nodes ``p:`` -> ``wds:`` with ``wikibase:rank``, ``a wikibase:BestRank`` on the
  truthy ones, the simple value ``ps:`` and, for quantities / times / coordinates, the
  value node ``psv:`` -> ``wdv:`` with amount + unit or time + precision;
  ``somevalue`` becomes a ``.well-known/genid`` IRI, ``novalue`` a ``wdno:`` class;
- the Commons sitelink (``schema:about`` / ``schema:isPartOf`` / ``schema:name``);
- for every property seen: its ``wikibase:claim``, ``statementProperty``,
  ``statementValue``, ``directClaim`` and ``propertyType`` declarations.

Qualifiers and references are not mapped (nothing the pipeline asks reads them).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator
from urllib.parse import quote

from pyoxigraph import Literal, NamedNode, Triple

WD = "http://www.wikidata.org/entity/"
WDS = "http://www.wikidata.org/entity/statement/"
WDV = "http://www.wikidata.org/value/"
WDT = "http://www.wikidata.org/prop/direct/"
P = "http://www.wikidata.org/prop/"
PS = "http://www.wikidata.org/prop/statement/"
PSV = "http://www.wikidata.org/prop/statement/value/"
PQ = "http://www.wikidata.org/prop/qualifier/"
WDNO = "http://www.wikidata.org/prop/novalue/"
GENID = "http://www.wikidata.org/.well-known/genid/"
WIKIBASE = "http://wikiba.se/ontology#"
SCHEMA = "http://schema.org/"
RDF_TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
RDFS_LABEL = NamedNode("http://www.w3.org/2000/01/rdf-schema#label")
XSD = "http://www.w3.org/2001/XMLSchema#"
WKT = NamedNode("http://www.opengis.net/ont/geosparql#wktLiteral")
COMMONS_SITE = "https://commons.wikimedia.org/"
UNIT_ONE = WD + "Q199"  # Wikidata writes unit "1" for dimensionless quantities

MAPPING_VERSION = "3"  # bump when the triples produced for the same input change

PROPERTY_TYPES = {
    "wikibase-item": "WikibaseItem",
    "wikibase-property": "WikibaseProperty",
    "string": "String",
    "external-id": "ExternalId",
    "monolingualtext": "Monolingualtext",
    "quantity": "Quantity",
    "time": "Time",
    "commonsMedia": "CommonsMedia",
    "url": "Url",
    "globe-coordinate": "GlobeCoordinate",
    "math": "Math",
    "musical-notation": "MusicalNotation",
    "tabular-data": "TabularData",
    "geo-shape": "GeoShape",
}
_VALUE_TYPE_TO_DATATYPE = {
    "string": "string",
    "monolingualtext": "monolingualtext",
    "quantity": "quantity",
    "time": "time",
    "globecoordinate": "globe-coordinate",
}


def _n(iri: str) -> NamedNode:
    return NamedNode(iri)


def _wb(name: str) -> NamedNode:
    return NamedNode(WIKIBASE + name)


@dataclass
class MappingStats:
    """What the mapping emitted and what it had to skip (and why)."""

    entities: int = 0
    statements: int = 0
    truthy: int = 0
    skipped: Counter = field(default_factory=Counter)


def entity_triples(entity: dict, languages: Iterable[str], stats: MappingStats, datatypes: dict[str, str]) -> Iterator[Triple]:
    """Triples of one entity; records each property's datatype in ``datatypes``."""
    subject = _n(WD + entity["id"])
    stats.entities += 1
    wanted = set(languages)
    for lang, label in sorted(entity.get("labels", {}).items()):
        if lang in wanted and isinstance(label, dict) and isinstance(label.get("value"), str):
            yield Triple(subject, RDFS_LABEL, Literal(label["value"], language=lang))
    if entity.get("type") == "property" and entity.get("datatype"):
        datatypes.setdefault(entity["id"], entity["datatype"])
    for pid in sorted(entity.get("claims", {}), key=lambda p: int(p[1:]) if p[1:].isdigit() else 0):
        if not re.fullmatch(r"P[1-9][0-9]*", pid):
            stats.skipped["malformed property id"] += 1
            continue
        yield from _property_triples(subject, entity["id"], pid, entity["claims"][pid], stats, datatypes)
    commons = entity.get("sitelinks", {}).get("commonswiki")
    if isinstance(commons, dict) and isinstance(commons.get("title"), str):
        title = commons["title"]
        page = _n(COMMONS_SITE + "wiki/" + quote(title.replace(" ", "_"), safe=":/(),'!*@$;=~-._"))
        yield Triple(page, _n(SCHEMA + "about"), subject)
        yield Triple(page, _n(SCHEMA + "isPartOf"), _n(COMMONS_SITE))
        yield Triple(page, _n(SCHEMA + "name"), Literal(title, language="en"))
        yield Triple(page, _n(SCHEMA + "inLanguage"), Literal("en"))
        yield Triple(page, RDF_TYPE, _n(SCHEMA + "Article"))


def _property_triples(subject: NamedNode, entity_id: str, pid: str, statements: list, stats: MappingStats, datatypes: dict[str, str]) -> Iterator[Triple]:
    valid = [s for s in statements if isinstance(s, dict) and isinstance(s.get("mainsnak"), dict)]
    if len(valid) != len(statements):
        stats.skipped["malformed statement"] += len(statements) - len(valid)
    ranks = {s.get("rank", "normal") for s in valid}
    best = "preferred" if "preferred" in ranks else "normal"
    for statement in valid:
        rank = statement.get("rank", "normal")
        if rank not in ("preferred", "normal", "deprecated"):
            stats.skipped["unknown rank"] += 1
            continue
        snak = statement["mainsnak"]
        datatype = snak.get("datatype") or _infer_datatype(snak)
        if datatype:
            datatypes.setdefault(pid, datatype)
        node = _n(WDS + _statement_local_name(entity_id, statement))
        is_best = rank == best
        stats.statements += 1
        yield Triple(subject, _n(P + pid), node)
        yield Triple(node, RDF_TYPE, _wb("Statement"))
        yield Triple(node, _wb("rank"), _wb(rank.capitalize() + "Rank"))
        if is_best:
            yield Triple(node, RDF_TYPE, _wb("BestRank"))
        snaktype = snak.get("snaktype", "value")
        if snaktype == "novalue":
            yield Triple(node, RDF_TYPE, _n(WDNO + pid))
            if is_best:
                yield Triple(subject, RDF_TYPE, _n(WDNO + pid))
            continue
        if snaktype == "somevalue":
            value = _n(GENID + hashlib.md5(node.value.encode()).hexdigest())
            yield Triple(node, _n(PS + pid), value)
            if is_best:
                yield Triple(subject, _n(WDT + pid), value)
            continue
        mapped = _simple_value(snak, datatype, stats)
        if mapped is None:
            continue
        try:  # built before anything of the value is emitted: a bad unit/precision/bound skips the whole value
            value_node = list(_value_node(node, pid, snak, datatype))
        except (KeyError, TypeError, ValueError) as error:
            stats.skipped[f"invalid {datatype} value: {type(error).__name__}"] += 1
            continue
        yield Triple(node, _n(PS + pid), mapped)
        if is_best:
            stats.truthy += 1
            yield Triple(subject, _n(WDT + pid), mapped)
        yield from value_node
        yield from _qualifier_triples(node, statement, stats)


QUALIFIERS = ("P585",)  # point in time: the date a time-varying value (population, head of government) holds for


def _qualifier_triples(node: NamedNode, statement: dict, stats: MappingStats) -> Iterator[Triple]:
    """``pq:`` triples of the statement's qualifiers in ``QUALIFIERS`` (simple values, as WDQS has them)."""
    qualifiers = statement.get("qualifiers")
    if not isinstance(qualifiers, dict):
        return
    for pid in QUALIFIERS:
        for snak in qualifiers.get(pid) or []:
            if not isinstance(snak, dict) or snak.get("snaktype", "value") != "value":
                continue
            value = _simple_value(snak, snak.get("datatype") or _infer_datatype(snak), stats)
            if value is not None:
                yield Triple(node, _n(PQ + pid), value)


def _statement_local_name(entity_id: str, statement: dict) -> str:
    guid = statement.get("id")
    if isinstance(guid, str) and guid:
        return quote(guid.replace("$", "-"), safe="-")
    digest = hashlib.sha1(json.dumps(statement, sort_keys=True).encode()).hexdigest()
    return f"{entity_id}-{digest}"


def _infer_datatype(snak: dict) -> str | None:
    datavalue = snak.get("datavalue")
    if not isinstance(datavalue, dict):
        return None
    kind = datavalue.get("type")
    if kind == "wikibase-entityid":
        value = datavalue.get("value", {})
        return "wikibase-property" if value.get("entity-type") == "property" else "wikibase-item"
    return _VALUE_TYPE_TO_DATATYPE.get(kind) if isinstance(kind, str) else None


def _simple_value(snak: dict, datatype: str | None, stats: MappingStats) -> NamedNode | Literal | None:
    datavalue = snak.get("datavalue")
    if not isinstance(datavalue, dict) or "value" not in datavalue:
        stats.skipped["value snak without datavalue"] += 1
        return None
    value = datavalue["value"]
    try:
        if datatype in ("wikibase-item", "wikibase-property"):
            target = value.get("id") if isinstance(value, dict) else None
            if target is None and isinstance(value, dict) and "numeric-id" in value:
                target = ("P" if datatype == "wikibase-property" else "Q") + str(value["numeric-id"])
            if not isinstance(target, str) or not re.fullmatch(r"[QP][1-9][0-9]*", target):
                stats.skipped["entity value without a Q/P id"] += 1
                return None
            return _n(WD + target)
        if datatype in ("string", "external-id", "math", "musical-notation"):
            return Literal(str(value))
        if datatype == "monolingualtext":
            return Literal(value["text"], language=value["language"])
        if datatype == "quantity":
            return Literal(_decimal(value["amount"]), datatype=_n(XSD + "decimal"))
        if datatype == "time":
            return Literal(_xsd_datetime(value["time"], value.get("precision")), datatype=_n(XSD + "dateTime"))
        if datatype == "commonsMedia":
            return _n("http://commons.wikimedia.org/wiki/Special:FilePath/" + quote(str(value).replace(" ", "_")))
        if datatype in ("url", "tabular-data", "geo-shape"):
            return _n(quote(str(value), safe=":/?#[]@!$&'()*+,;=%~-._"))
        if datatype == "globe-coordinate":
            return Literal(f"Point({value['longitude']} {value['latitude']})", datatype=WKT)
    except (KeyError, TypeError, ValueError) as error:
        stats.skipped[f"invalid {datatype} value: {type(error).__name__}"] += 1
        return None
    stats.skipped[f"unsupported datatype {datatype}"] += 1
    return None


def _value_node(statement: NamedNode, pid: str, snak: dict, datatype: str | None) -> Iterator[Triple]:
    value = snak["datavalue"]["value"]
    if datatype not in ("quantity", "time"):
        return
    node = _n(WDV + hashlib.md5(json.dumps(value, sort_keys=True).encode()).hexdigest())
    yield Triple(statement, _n(PSV + pid), node)
    if datatype == "quantity":
        unit = value.get("unit", "1")
        yield Triple(node, RDF_TYPE, _wb("QuantityValue"))
        yield Triple(node, _wb("quantityAmount"), Literal(_decimal(value["amount"]), datatype=_n(XSD + "decimal")))
        yield Triple(node, _wb("quantityUnit"), _n(UNIT_ONE if unit == "1" else unit))
        for bound, name in (("upperBound", "quantityUpperBound"), ("lowerBound", "quantityLowerBound")):
            if bound in value:
                yield Triple(node, _wb(name), Literal(_decimal(value[bound]), datatype=_n(XSD + "decimal")))
    else:
        yield Triple(node, RDF_TYPE, _wb("TimeValue"))
        yield Triple(node, _wb("timeValue"), Literal(_xsd_datetime(value["time"], value["precision"]), datatype=_n(XSD + "dateTime")))
        yield Triple(node, _wb("timePrecision"), Literal(str(int(value["precision"])), datatype=_n(XSD + "integer")))
        yield Triple(node, _wb("timeTimezone"), Literal(str(int(value.get("timezone", 0))), datatype=_n(XSD + "integer")))
        if value.get("calendarmodel"):
            yield Triple(node, _wb("timeCalendarModel"), _n(value["calendarmodel"]))


def property_declarations(datatypes: dict[str, str]) -> Iterator[Triple]:
    """The property-entity triples WDQS has for each property (claim/statement/direct predicates)."""
    for pid in sorted(datatypes, key=lambda p: int(p[1:])):
        prop = _n(WD + pid)
        yield Triple(prop, RDF_TYPE, _wb("Property"))
        kind = PROPERTY_TYPES.get(datatypes[pid], "".join(w.capitalize() for w in re.split(r"[-_]", datatypes[pid])))
        yield Triple(prop, _wb("propertyType"), _wb(kind))
        yield Triple(prop, _wb("directClaim"), _n(WDT + pid))
        yield Triple(prop, _wb("claim"), _n(P + pid))
        yield Triple(prop, _wb("statementProperty"), _n(PS + pid))
        yield Triple(prop, _wb("statementValue"), _n(PSV + pid))
        yield Triple(prop, _wb("qualifier"), _n(PQ + pid))
        yield Triple(prop, _wb("novalue"), _n(WDNO + pid))


def _decimal(amount: object) -> str:
    text = str(amount).strip()
    if text.startswith("+"):
        text = text[1:]
    float(text)  # raises ValueError on garbage
    return text


def _xsd_datetime(time: str, precision: object) -> str:
    """``+1889-03-31T00:00:00Z`` -> ``1889-03-31T00:00:00Z``; 00 month/day (year precision) -> 01, as WDQS does.

    Like Wikibase's RDF export (DateTimeValueCleaner, XSD 1.1), a year before the common era
    at year precision or finer moves up by one: JSON ``-0044`` (44 BC) is ``-0043``, ``-0001`` is ``0000``.
    """
    match = re.fullmatch(r"([+-]?)(\d+)-(\d\d)-(\d\d)(T\d\d:\d\d:\d\dZ)", time)
    if not match:
        raise ValueError(f"not a Wikibase time: {time!r}")
    sign, year, month, day, rest = match.groups()
    month = "01" if month == "00" else month
    day = "01" if day == "00" else day
    if sign == "-" and int(precision) >= 9:  # type: ignore[call-overload]
        shifted = int(year) - 1
        sign, year = ("-" if shifted else ""), f"{shifted:04d}"
    return f"{'-' if sign == '-' else ''}{year}-{month}-{day}{rest}"
