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

Qualifiers other than P585 and references are not mapped (nothing the pipeline asks reads them).

Each triple is one N-Triples line built from preformatted strings (no RDF term objects per triple);
IRIs and language tags that come from the data are checked (and written) by pyoxigraph once each.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator
from urllib.parse import quote

from pyoxigraph import Literal, NamedNode

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
XSD = "http://www.w3.org/2001/XMLSchema#"
COMMONS_SITE = "https://commons.wikimedia.org/"
UNIT_ONE = WD + "Q199"  # Wikidata writes unit "1" for dimensionless quantities

RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
RDFS_LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
DECIMAL = f"^^<{XSD}decimal>"
DATETIME = f"^^<{XSD}dateTime>"
INTEGER = f"^^<{XSD}integer>"
WKT = "^^<http://www.opengis.net/ont/geosparql#wktLiteral>"

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
_PID = re.compile(r"P[1-9][0-9]*")
_ENTITY_ID = re.compile(r"[QP][1-9][0-9]*")
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"})


def _wb(name: str) -> str:
    return f"<{WIKIBASE}{name}>"


def _string(text: str) -> str:
    """A string's N-Triples form (quotes included); ValueError for text that is not Unicode scalars."""
    text.encode("utf-8")  # a lone surrogate cannot be written (pyoxigraph refused it too)
    if "\\" in text or '"' in text or "\n" in text or "\r" in text:
        text = text.translate(_ESCAPES)
    return f'"{text}"'


@functools.lru_cache(maxsize=4096)
def _checked_iri(iri: str) -> str:
    """``<iri>`` for an IRI from the data (units, calendars, URLs): ValueError unless absolute and valid."""
    return str(NamedNode(iri))


@functools.lru_cache(maxsize=256)
def _language(tag: str) -> str:
    """``@tag`` as RDF writes it (checked and normalized by pyoxigraph); ValueError for a bad tag."""
    return str(Literal("", language=tag))[2:]


@dataclass
class MappingStats:
    """What the mapping emitted and what it had to skip (and why)."""

    entities: int = 0
    statements: int = 0
    truthy: int = 0
    skipped: Counter = field(default_factory=Counter)

    def subtract(self, other: "MappingStats") -> None:
        """Take back what ``other`` counted (an entity mapped again with more records)."""
        self.entities -= other.entities
        self.statements -= other.statements
        self.truthy -= other.truthy
        self.skipped.subtract(other.skipped)
        self.skipped = +self.skipped


class Datatypes:
    """Each property's datatype: the first met in (entity id, property id, statement) order, whatever
    order the entities are mapped in."""

    def __init__(self) -> None:
        self.chosen: dict[str, tuple[tuple, str]] = {}

    def offer(self, pid: str, datatype: str, where: tuple) -> None:
        current = self.chosen.get(pid)
        if current is None or where < current[0]:
            self.chosen[pid] = (where, datatype)

    def by_property(self) -> dict[str, str]:
        return {pid: datatype for pid, (_, datatype) in self.chosen.items()}


def entity_sort_key(entity_id: str) -> tuple[str, int]:
    return entity_id[0], int(entity_id[1:])


def entity_lines(entity: dict, languages: Iterable[str], stats: MappingStats, datatypes: Datatypes) -> Iterator[str]:
    """N-Triples lines of one (normalized) entity; offers each property's datatype to ``datatypes``."""
    entity_id = entity["id"]
    subject = f"<{WD}{entity_id}>"
    order = entity_sort_key(entity_id)
    stats.entities += 1
    wanted = set(languages)
    for lang, label in sorted(entity.get("labels", {}).items()):
        if lang in wanted and isinstance(label, dict) and isinstance(label.get("value"), str):
            yield f"{subject} {RDFS_LABEL} {_string(label['value'])}{_language(lang)} .\n"
    if entity.get("type") == "property" and entity.get("datatype"):
        datatypes.offer(entity_id, entity["datatype"], (order, -1, 0))
    claims = entity.get("claims", {})
    for position, pid in enumerate(sorted(claims, key=lambda p: int(p[1:]) if p[1:].isdigit() else 0)):
        if not _PID.fullmatch(pid):
            stats.skipped["malformed property id"] += 1
            continue
        yield from _property_lines(subject, entity_id, pid, claims[pid], stats, datatypes, (order, position))
    commons = entity.get("sitelinks", {}).get("commonswiki")
    if isinstance(commons, dict) and isinstance(commons.get("title"), str):
        title = commons["title"]
        page = "<" + COMMONS_SITE + "wiki/" + quote(title.replace(" ", "_"), safe=":/(),'!*@$;=~-._") + ">"
        yield f"{page} <{SCHEMA}about> {subject} .\n"
        yield f"{page} <{SCHEMA}isPartOf> <{COMMONS_SITE}> .\n"
        yield f"{page} <{SCHEMA}name> {_string(title)}@en .\n"
        yield f'{page} <{SCHEMA}inLanguage> "en" .\n'
        yield f"{page} {RDF_TYPE} <{SCHEMA}Article> .\n"


def _property_lines(subject: str, entity_id: str, pid: str, statements: list, stats: MappingStats,
                    datatypes: Datatypes, where: tuple) -> Iterator[str]:
    valid = [s for s in statements if isinstance(s, dict) and isinstance(s.get("mainsnak"), dict)]
    if len(valid) != len(statements):
        stats.skipped["malformed statement"] += len(statements) - len(valid)
    ranks = {s.get("rank", "normal") for s in valid}
    best = "preferred" if "preferred" in ranks else "normal"
    claim, simple, direct = f"<{P}{pid}>", f"<{PS}{pid}>", f"<{WDT}{pid}>"
    for index, statement in enumerate(valid):
        rank = statement.get("rank", "normal")
        if rank not in ("preferred", "normal", "deprecated"):
            stats.skipped["unknown rank"] += 1
            continue
        snak = statement["mainsnak"]
        datatype = snak.get("datatype") or _infer_datatype(snak)
        if datatype:
            datatypes.offer(pid, datatype, (*where, index))
        local = WDS + _statement_local_name(entity_id, statement)
        node = f"<{local}>"
        is_best = rank == best
        stats.statements += 1
        yield f"{subject} {claim} {node} .\n"
        yield f"{node} {RDF_TYPE} {_wb('Statement')} .\n"
        yield f"{node} {_wb('rank')} {_wb(rank.capitalize() + 'Rank')} .\n"
        if is_best:
            yield f"{node} {RDF_TYPE} {_wb('BestRank')} .\n"
        snaktype = snak.get("snaktype", "value")
        if snaktype == "novalue":
            yield f"{node} {RDF_TYPE} <{WDNO}{pid}> .\n"
            if is_best:
                yield f"{subject} {RDF_TYPE} <{WDNO}{pid}> .\n"
            continue
        if snaktype == "somevalue":
            value = f"<{GENID}{hashlib.md5(local.encode()).hexdigest()}>"
            yield f"{node} {simple} {value} .\n"
            if is_best:
                yield f"{subject} {direct} {value} .\n"
            continue
        mapped = _simple_value(snak, datatype, stats)
        if mapped is None:
            continue
        try:  # built before anything of the value is emitted: a bad unit/precision/bound skips the whole value
            value_node = list(_value_node(node, pid, snak, datatype))
        except (KeyError, TypeError, ValueError) as error:
            stats.skipped[f"invalid {datatype} value: {type(error).__name__}"] += 1
            continue
        yield f"{node} {simple} {mapped} .\n"
        if is_best:
            stats.truthy += 1
            yield f"{subject} {direct} {mapped} .\n"
        yield from value_node
        yield from _qualifier_lines(node, statement, stats)


QUALIFIERS = ("P585",)  # point in time: the date a time-varying value (population, head of government) holds for


def _qualifier_lines(node: str, statement: dict, stats: MappingStats) -> Iterator[str]:
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
                yield f"{node} <{PQ}{pid}> {value} .\n"


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


def _simple_value(snak: dict, datatype: str | None, stats: MappingStats) -> str | None:
    """The N-Triples term of the snak's simple value, or None (counted in ``stats.skipped``)."""
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
            if not isinstance(target, str) or not _ENTITY_ID.fullmatch(target):
                stats.skipped["entity value without a Q/P id"] += 1
                return None
            return f"<{WD}{target}>"
        if datatype in ("string", "external-id", "math", "musical-notation"):
            return _string(str(value))
        if datatype == "monolingualtext":
            text = value["text"]
            if not isinstance(text, str):
                raise TypeError("monolingual text is not a string")
            return _string(text) + _language(value["language"])
        if datatype == "quantity":
            return _string(_decimal(value["amount"])) + DECIMAL
        if datatype == "time":
            return _string(_xsd_datetime(value["time"], value.get("precision"))) + DATETIME
        if datatype == "commonsMedia":
            return f"<http://commons.wikimedia.org/wiki/Special:FilePath/{quote(str(value).replace(' ', '_'))}>"
        if datatype in ("url", "tabular-data", "geo-shape"):
            return _checked_iri(quote(str(value), safe=":/?#[]@!$&'()*+,;=%~-._"))
        if datatype == "globe-coordinate":
            return _string(f"Point({value['longitude']} {value['latitude']})") + WKT
    except (KeyError, TypeError, ValueError) as error:
        stats.skipped[f"invalid {datatype} value: {type(error).__name__}"] += 1
        return None
    stats.skipped[f"unsupported datatype {datatype}"] += 1
    return None


def _value_node(statement: str, pid: str, snak: dict, datatype: str | None) -> Iterator[str]:
    value = snak["datavalue"]["value"]
    if datatype not in ("quantity", "time"):
        return
    node = f"<{WDV}{hashlib.md5(json.dumps(value, sort_keys=True).encode()).hexdigest()}>"
    yield f"{statement} <{PSV}{pid}> {node} .\n"
    if datatype == "quantity":
        unit = value.get("unit", "1")
        yield f"{node} {RDF_TYPE} {_wb('QuantityValue')} .\n"
        yield f"{node} {_wb('quantityAmount')} {_string(_decimal(value['amount']))}{DECIMAL} .\n"
        yield f"{node} {_wb('quantityUnit')} {_checked_iri(UNIT_ONE if unit == '1' else unit)} .\n"
        for bound, name in (("upperBound", "quantityUpperBound"), ("lowerBound", "quantityLowerBound")):
            if bound in value:
                yield f"{node} {_wb(name)} {_string(_decimal(value[bound]))}{DECIMAL} .\n"
    else:
        yield f"{node} {RDF_TYPE} {_wb('TimeValue')} .\n"
        yield f"{node} {_wb('timeValue')} {_string(_xsd_datetime(value['time'], value['precision']))}{DATETIME} .\n"
        yield f"{node} {_wb('timePrecision')} \"{int(value['precision'])}\"{INTEGER} .\n"
        yield f"{node} {_wb('timeTimezone')} \"{int(value.get('timezone', 0))}\"{INTEGER} .\n"
        if value.get("calendarmodel"):
            yield f"{node} {_wb('timeCalendarModel')} {_checked_iri(value['calendarmodel'])} .\n"


def property_declarations(datatypes: dict[str, str]) -> Iterator[str]:
    """The property-entity triples WDQS has for each property (claim/statement/direct predicates)."""
    for pid in sorted(datatypes, key=lambda p: int(p[1:])):
        prop = f"<{WD}{pid}>"
        kind = PROPERTY_TYPES.get(datatypes[pid], "".join(w.capitalize() for w in re.split(r"[-_]", datatypes[pid])))
        yield f"{prop} {RDF_TYPE} {_wb('Property')} .\n"
        yield f"{prop} {_wb('propertyType')} {_wb(kind)} .\n"
        for predicate, base in (("directClaim", WDT), ("claim", P), ("statementProperty", PS),
                                ("statementValue", PSV), ("qualifier", PQ), ("novalue", WDNO)):
            yield f"{prop} {_wb(predicate)} <{base}{pid}> .\n"


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
