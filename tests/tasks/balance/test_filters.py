import pyarrow as pa
import pytest

from reasonvqa.tasks.balance.filters import FILTER_COLUMNS, EmptySelectionError, filter_rows, narrow_selected
from tests.tasks.balance.conftest import pool_of, question


@pytest.fixture
def pool():
    return pool_of(
        [
            question("q1", "vg:1", "P17", "France", domains=["Places & Locations"], n_hop=1),
            question("q2", "vg:2", "P571", "1889", domains=["History & Events"], n_hop=2),
            question("q3", "gldv2:a", "P84", "Eiffel", domains=["Places & Locations", "People & Society"], n_hop=3),
            question("q4", "gldv2:b", "P31", "tower", domains=[], n_hop=1),
        ]
    )


def resplit_selection(pool: pa.Table, **filters) -> tuple[pa.Table, dict]:
    """The selected questions and the report, as ``flows/resplit.py`` takes them (mask, then narrowed rows)."""
    keep, report = filter_rows(pool, **filters)
    return narrow_selected(pool.filter(pa.array(keep)), filters.get("domains"), filters.get("domain_match", "route")), report


def ids(result) -> list[str]:
    return result[0]["question_id"].to_pylist()


def test_domains_all_keeps_only_selected_domains(pool):
    result = resplit_selection(pool, domains=["Places & Locations", "History & Events"], domain_match="all")
    assert ids(result) == ["q1", "q2"]  # q3 also has People & Society; q4 has no domain
    assert result[1]["dropped_by"] == {"domains": 2}
    assert result[1]["filters"] == {"domains": ["History & Events", "Places & Locations"], "domain_match": "all"}


def test_domains_any_keeps_tagged_questions(pool):
    result = resplit_selection(pool, domains=["Places & Locations"], domain_match="any")
    assert ids(result) == ["q1", "q3"]
    assert result[1]["filters"]["domain_match"] == "any"


BANK_DOMAINS = {
    "P17": ("Places & Locations", "Politics & Government"),
    "P36": ("Places & Locations", "Politics & Government"),
    "P571": ("History & Events",),
    "P84": ("Architecture & Buildings", "People & Society"),
    "P31": (),
}


def test_route_match_is_the_default_and_narrows_domains():
    routed = pool_of([
        question("r1", "vg:1", "P36", "Paris", route=["P17", "P36"], n_hop=2,
                 domains=["Places & Locations", "Politics & Government"]),
        question("r2", "vg:2", "P571", "1889", route=["P84", "P571"], n_hop=2,
                 domains=["Architecture & Buildings", "People & Society", "History & Events"]),
        question("r3", "vg:3", "P571", "1900", route=["P571"], domains=["History & Events"]),
    ])
    result = resplit_selection(routed, domains=["Places & Locations", "History & Events"], property_domains=BANK_DOMAINS)
    assert ids(result) == ["r1", "r3"]  # r2 passes through P84, outside both domains
    assert result[0]["domains"].to_pylist() == [["Places & Locations"], ["History & Events"]]
    assert result[1]["filters"]["domain_match"] == "route"


def test_route_match_needs_the_property_domains(pool):
    with pytest.raises(ValueError, match="property_domains"):
        resplit_selection(pool, domains=["Places & Locations"])


def test_sources_and_hops_combine(pool):
    result = resplit_selection(pool, sources=["gldv2"], hops=[1, 2])
    assert ids(result) == ["q4"]
    assert result[1]["dropped_by"] == {"sources": 2, "hops": 1}


def test_unknown_values_are_reported(pool):
    result = resplit_selection(pool, domains=["Places & Locations", "Sports"], domain_match="any")
    assert result[1]["unknown_values"] == {"domains": ["Sports"]}
    assert result[1]["available"]["sources"] == ["gldv2", "vg"]


def test_empty_selection_is_a_clear_error(pool):
    with pytest.raises(EmptySelectionError, match="match none of the 4 pool questions") as info:
        resplit_selection(pool, domains=["Sports"], domain_match="any")
    assert info.value.report["questions_out"] == 0
    assert info.value.report["available"]["domains"] == ["History & Events", "People & Society", "Places & Locations"]


def test_no_filter_keeps_everything(pool):
    assert resplit_selection(pool)[0].num_rows == 4


def test_the_filter_columns_alone_give_the_same_rows_and_report(pool):
    keep, report = filter_rows(pool.select(list(FILTER_COLUMNS)), sources=["gldv2"], hops=[1, 3])
    assert keep.tolist() == [False, False, True, True]
    assert report == resplit_selection(pool, sources=["gldv2"], hops=[1, 3])[1]
