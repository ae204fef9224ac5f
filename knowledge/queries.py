"""SPARQL text of every query the pipeline sends.

The same text goes to the Wikidata Query Service and to the embedded Oxigraph
mirror, so the mirror must hold the triples these patterns read (see
``rdf_mapping``). Prefixes are declared explicitly: WDQS predefines them, the
mirror does not.
"""

from __future__ import annotations

from typing import Sequence

from reasonvqa.knowledge.ids import sparql_string, values_items, values_properties, values_strings

PREFIXES = """PREFIX wd: <http://www.wikidata.org/entity/>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX pq: <http://www.wikidata.org/prop/qualifier/>
PREFIX wikibase: <http://wikiba.se/ontology#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX schema: <http://schema.org/>
"""

COMMONS_SITE = "https://commons.wikimedia.org/"
WIKIMEDIA_CATEGORY = "Q4167836"


def items_by_wordnet31(wn31_ids: Sequence[str]) -> str:
    """Items whose truthy P8814 (WordNet 3.1 Synset ID) is one of ``wn31_ids``."""
    return (
        PREFIXES
        + "SELECT ?wn ?item WHERE {\n  "
        + values_strings("wn", wn31_ids)
        + "\n  ?item wdt:P8814 ?wn .\n}"
    )


def items_by_commons_sitelink(titles: Sequence[str]) -> str:
    """The item holding each Commons sitelink ``Category:<name>``, with its P301 main topic.

    ``titles`` are full page titles (``Category:Mount Everest``). Commons sitelinks
    carry English-tagged names in the Wikibase RDF mapping.
    """
    return (
        PREFIXES
        + "SELECT ?title ?holder ?main ?holderClass WHERE {\n  "
        + values_strings("title", titles, lang="en")
        + f"\n  ?page schema:name ?title ;\n        schema:isPartOf <{COMMONS_SITE}> ;\n        schema:about ?holder .\n"
        + "  OPTIONAL { ?holder wdt:P301 ?main . }\n"
        + f"  OPTIONAL {{ ?holder wdt:P31 ?holderClass . FILTER(?holderClass = wd:{WIKIMEDIA_CATEGORY}) }}\n}}"
    )


def items_by_commons_category(names: Sequence[str]) -> str:
    """Items whose truthy P373 (Commons category) is one of ``names`` (no ``Category:`` prefix)."""
    return (
        PREFIXES
        + "SELECT ?name ?item WHERE {\n  "
        + values_strings("name", names)
        + "\n  ?item wdt:P373 ?name .\n}"
    )


def best_rank_statements(qids: Sequence[str], pids: Sequence[str]) -> str:
    """Best-rank statements of ``pids`` on ``qids``, with quantity units, time precision and the
    statement's point in time (P585 qualifier) where it has one.

    ``wikibase:BestRank`` is exactly the truthy set (preferred if any, else normal;
    never deprecated); the statement node also gives the rank and, through the
    ``psv:`` value node, the unit of a quantity and the precision of a time.
    """
    return (
        PREFIXES
        + "SELECT ?s ?prop ?rank ?v ?amount ?unit ?time ?precision ?pit WHERE {\n  "
        + values_items("s", qids)
        + "\n  "
        + values_properties("prop", pids)
        + "\n  ?prop wikibase:claim ?p ;\n        wikibase:statementProperty ?ps .\n"
        + "  ?s ?p ?st .\n  ?st a wikibase:BestRank ;\n      wikibase:rank ?rank ;\n      ?ps ?v .\n"
        + "  OPTIONAL {\n    ?prop wikibase:statementValue ?psv .\n    ?st ?psv ?node .\n"
        + "    OPTIONAL { ?node wikibase:quantityAmount ?amount ; wikibase:quantityUnit ?unit . }\n"
        + "    OPTIONAL { ?node wikibase:timeValue ?time ; wikibase:timePrecision ?precision . }\n  }\n"
        + "  OPTIONAL { ?st pq:P585 ?pit . }\n}"
    )


def labels(qids: Sequence[str], language: str = "en") -> str:
    """``rdfs:label`` of each item in ``language``."""
    return (
        PREFIXES
        + "SELECT ?item ?label WHERE {\n  "
        + values_items("item", qids)
        + "\n  ?item rdfs:label ?label .\n  FILTER(LANG(?label) = "
        + sparql_string(language)
        + ")\n}"
    )
