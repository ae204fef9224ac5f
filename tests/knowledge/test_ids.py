"""Identifier checks and SPARQL fragments: nothing unchecked reaches a query string."""

from __future__ import annotations

import pytest
from pyoxigraph import Store

from reasonvqa.knowledge import queries
from reasonvqa.knowledge.ids import (
    MalformedId,
    batched,
    check_qid,
    id_sort_key,
    is_pid,
    is_qid,
    qid_from_iri,
    sparql_string,
    values_items,
    values_strings,
)


@pytest.mark.parametrize("value", ["Q1", "Q144", "Q123456789"])
def test_valid_qids(value):
    assert is_qid(value) and check_qid(value) == value


@pytest.mark.parametrize(
    "value", ["Q0", "Q01", "q144", "Q144 ", "Q144}", "Q144 } ; DROP ALL", "P17", "Q", "", None, 144, "Q1\n"]
)
def test_malformed_qids_are_refused(value):
    assert not is_qid(value)
    with pytest.raises(MalformedId):
        values_items("s", ["Q1", value])


def test_pids():
    assert is_pid("P8814") and not is_pid("P17 ") and not is_pid("Q17")


def test_qid_from_iri_only_accepts_wikidata_entities():
    assert qid_from_iri("http://www.wikidata.org/entity/Q144") == "Q144"
    assert qid_from_iri("http://www.wikidata.org/entity/P17") is None
    assert qid_from_iri("http://example.org/entity/Q144") is None
    assert qid_from_iri("http://www.wikidata.org/.well-known/genid/abc") is None


def test_numeric_order():
    assert sorted(["Q10", "Q2", "Q100"], key=id_sort_key) == ["Q2", "Q10", "Q100"]


def test_string_literals_are_escaped():
    assert sparql_string('a "b" \\ c\nd') == '"a \\"b\\" \\\\ c\\nd"'
    assert sparql_string("Category:Chichén Itzá", lang="en") == '"Category:Chichén Itzá"@en'
    with pytest.raises(MalformedId):
        sparql_string("x", lang="en } ; DROP")


def test_injection_through_a_category_name_stays_a_literal():
    """A hostile name is matched as text; the query still parses and finds nothing."""
    store = Store()
    hostile = 'X" } ?s ?p ?o . FILTER("1'
    rows = list(store.query(queries.items_by_commons_category([hostile, "Eiffel Tower"])))
    assert rows == []
    assert values_strings("name", [hostile]) == 'VALUES ?name { "X\\" } ?s ?p ?o . FILTER(\\"1" }'


def test_batches():
    assert list(batched(list(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError):
        list(batched([1], 0))
