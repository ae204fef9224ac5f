"""The release scan: each question traced back through the facts, its subjects typed, its answer unique."""

from __future__ import annotations

import polars as pl
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.questions.bank import load_bank
from reasonvqa.tasks.questions.fidelity import scan_questions
from tests.tasks.questions.conftest import item


@pytest.fixture(scope="module")
def bank():
    return load_bank()


FACTS = [
    item("Q243", "Eiffel Tower", "P31", "Q12518", "tower"),
    item("Q243", "Eiffel Tower", "P17", "Q142", "France"),
    item("Q243", "Eiffel Tower", "P2175", "Q12136", "disease"),
    item("Q142", "France", "P31", "Q6256", "country", hop=2),
    item("Q142", "France", "P36", "Q90", "Paris", hop=2),
    item("Q142", "France", "P47", "Q29", "Spain", hop=2),
    item("Q142", "France", "P47", "Q31", "Belgium", hop=2),
    item("Q142", "France", "P30", "Q46", "Europe", hop=2),
]
LINKS = [dict(object_id="gldv2:a/o0", image_id="gldv2:a", qid="Q243", label="Eiffel Tower", method="commons:p373")]


def _question(qid, route, answer, choices, category="literal"):
    return dict(question_id=qid, image_id="gldv2:a", object_ids=["gldv2:a/o0"], question="?", answer=answer,
                choices=choices, answer_category=category, n_hop=len(route), route=route, property_id=route[-1])


def _scan(questions, bank, facts=FACTS):
    return scan_questions(pl.from_arrow(schemas.from_rows(questions, schemas.QUESTIONS)),
                          pl.from_arrow(schemas.from_rows(facts, schemas.FACTS)),
                          pl.from_arrow(schemas.from_rows(LINKS, schemas.ENTITY_LINKS)), bank)


def test_a_clean_question_passes(bank):
    report = _scan([_question("a", ["P17", "P36"], "Paris", ["Paris", "Madrid", "Rome", "Berlin"])], bank)
    assert report == {"questions": 1, "problems": [], "counts": {}}


def test_each_kind_of_problem_is_found(bank):
    report = _scan([
        _question("bad-type", ["P2175"], "disease", ["disease", "flu", "pain", "cold"]),
        _question("two-values", ["P17", "P47"], "Spain", ["Spain", "Italy", "Germany", "Austria"]),
        _question("true-distractor", ["P17", "P30"], "Europe", ["Europe", "Insular Oceania", "Asia", "Africa"]),
        _question("untraceable", ["P17", "P38"], "euro", ["euro", "yen", "dollar", "pound"]),
    ], bank)
    assert report["counts"] == {"multiple_values": 1, "route_not_in_facts": 1, "subject_type_mismatch": 1}
    by_question = {p["question_id"]: p["problem"] for p in report["problems"]}
    assert by_question["bad-type"] == "subject_type_mismatch"
    assert by_question["two-values"] == "multiple_values"
    assert by_question["untraceable"] == "route_not_in_facts"


def test_a_distractor_naming_the_true_value_is_found_through_closed_set_aliases(bank):
    # the question asks France's continent (answer Europe); a distractor in other case is the answer again
    report = _scan([_question("y", ["P17", "P30"], "Europe", ["Europe", "europe", "Asia", "Africa"])], bank)
    assert [p["problem"] for p in report["problems"]] == ["distractor_is_true"]
    # Wikidata labels Q55643 "Insular Oceania"; the closed set renders it "Oceania": offering Oceania is offering the truth
    facts = [f for f in FACTS if f["property_id"] != "P30"] + [item("Q142", "France", "P30", "Q55643", "Insular Oceania", hop=2)]
    report = _scan([_question("z", ["P17", "P30"], "Europe", ["Europe", "Oceania", "Asia", "Africa"], "fixed")], bank, facts)
    assert [p["problem"] for p in report["problems"]] == ["distractor_is_true"]
