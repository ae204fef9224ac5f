"""The facts stage's statements query answered from the embedded mirror's store by index look-ups.

Oxigraph plans ``queries.best_rank_statements`` from the smaller of its two ``VALUES`` blocks and evaluates
the value-node ``OPTIONAL`` over every statement of the store before joining it, so each query costs time in
proportion to the whole store (0.4-1.4 s per query at 1 % of ReasonVQA's size, growing with the store: the
facts stage was quadratic). ``StatementsClient`` recognises that query (its text is rebuilt from the parsed
ids and must match byte for byte), answers it with the same bindings from the store opened read-only in
this process, each subject's statements read through the subject index, and passes every other query
to the wrapped client unchanged. The query text, and so the recorded ``knowledge_queries``, stays the same.
"""

from __future__ import annotations

import itertools
import re
import threading
from pathlib import Path

from pyoxigraph import Literal, NamedNode, Store

from reasonvqa.knowledge import queries
from reasonvqa.knowledge.mirror import json_term
from reasonvqa.knowledge.wikidata import Binding, SparqlClient, WrappedClient

WD = "http://www.wikidata.org/entity/"
WIKIBASE = "http://wikiba.se/ontology#"
_VALUES = re.compile(r"VALUES \?(s|prop) \{((?: wd:[QP][0-9]+)*) \}")
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
POINT_IN_TIME = "http://www.wikidata.org/prop/qualifier/P585"
_BEST = NamedNode(WIKIBASE + "BestRank")
_PAIRS = ((WIKIBASE + "quantityAmount", WIKIBASE + "quantityUnit", ("amount", "unit")),
          (WIKIBASE + "timeValue", WIKIBASE + "timePrecision", ("time", "precision")))


def statements_query_ids(query: str) -> tuple[list[str], list[str]] | None:
    """The (items, properties) of a ``queries.best_rank_statements`` text, or None for any other text."""
    found = {name: terms.split() for name, terms in _VALUES.findall(query)}
    if set(found) != {"s", "prop"}:
        return None
    qids = [term[3:] for term in found["s"]]
    pids = [term[3:] for term in found["prop"]]
    if not qids or not pids or queries.best_rank_statements(qids, pids) != query:
        return None
    return qids, pids


class StatementsClient(WrappedClient):
    """A ``SparqlClient`` answering statements queries from the store at ``location``; the rest via ``client``
    (``requests`` counts the queries sent to the endpoint; those answered from the store are ``answered``)."""

    def __init__(self, client: SparqlClient, location: Path) -> None:
        super().__init__(client)
        self.store = Store.read_only(str(location))  # per client (~30 ms): a store rebuilt in place is never stale
        self.answered = 0  # statements queries answered from the store
        self._lock = threading.Lock()

    def select(self, query: str) -> list[Binding]:
        ids = statements_query_ids(query)
        if ids is None:
            return self.client.select(query)
        with self._lock:
            self.answered += 1
        return best_rank_statements(self.store, *ids)


def _triples(store: Store, subject: object) -> dict[str, list]:
    """The objects of every triple of ``subject``, by predicate IRI (one index look-up)."""
    found: dict[str, list] = {}
    if isinstance(subject, Literal):  # a literal is never a subject: no triple matches
        return found
    for quad in store.quads_for_pattern(subject, None, None):  # type: ignore[arg-type]
        found.setdefault(quad.predicate.value, []).append(quad.object)
    return found


def best_rank_statements(store: Store, qids: list[str], pids: list[str]) -> list[Binding]:
    """The bindings SPARQL gives ``queries.best_rank_statements(qids, pids)`` on ``store`` (same rows, same
    multiplicities; row order differs, and the recording client sorts rows anyway)."""
    rows: list[Binding] = []
    by_claim: dict[str, list[tuple[NamedNode, str, list[str]]]] = {}  # p: -> (property, ps:, its psv:s)
    for pid in pids:
        prop = NamedNode(WD + pid)
        declared = _triples(store, prop)
        value_predicates = [node.value for node in declared.get(WIKIBASE + "statementValue", [])]
        for claim in declared.get(WIKIBASE + "claim", []):
            for statement_property in declared.get(WIKIBASE + "statementProperty", []):
                by_claim.setdefault(claim.value, []).append((prop, statement_property.value, value_predicates))
    for qid in qids:
        subject = NamedNode(WD + qid)
        for predicate, nodes in _triples(store, subject).items():
            for prop, statement_property, value_predicates in by_claim.get(predicate, ()):
                for node in nodes:
                    statement = _triples(store, node)
                    if not any(t == _BEST for t in statement.get(RDF_TYPE, [])):
                        continue
                    base = {"s": json_term(subject), "prop": json_term(prop)}
                    optional = _value_nodes(store, statement, value_predicates)
                    points = [{"pit": json_term(t)} for t in statement.get(POINT_IN_TIME, [])] or [{}]
                    for rank, value, extra, point in itertools.product(
                            statement.get(WIKIBASE + "rank", []), statement.get(statement_property, []), optional, points):
                        rows.append({**base, "rank": json_term(rank), "v": json_term(value), **extra, **point})
    return rows


def _value_nodes(store: Store, statement: dict[str, list], value_predicates: list[str]) -> list[Binding]:
    """``OPTIONAL { ?prop wikibase:statementValue ?psv . ?st ?psv ?node . OPTIONAL {amount; unit}
    OPTIONAL {time; precision} }``: the bindings it adds, ``[{}]`` when the group has no match."""
    found: list[Binding] = []
    for psv in value_predicates:
        for node in statement.get(psv, []):
            value = _triples(store, node)
            parts = [_pairs(value, *names) for names in _PAIRS]
            found.extend({**quantity, **time} for quantity, time in itertools.product(*parts))
    return found or [{}]


def _pairs(value: dict[str, list], first: str, second: str, names: tuple[str, str]) -> list[Binding]:
    """``OPTIONAL { ?node <first> ?a ; <second> ?b . }``: every (a, b) pair, ``[{}]`` when there is none."""
    pairs = itertools.product(value.get(first, []), value.get(second, []))
    return [{names[0]: json_term(a), names[1]: json_term(b)} for a, b in pairs] or [{}]
