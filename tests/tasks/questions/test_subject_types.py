"""Subject types: class membership through P31/P279*, and routes whose subjects do not fit are never built."""

from __future__ import annotations

import polars as pl

from reasonvqa import schemas
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.index import build_index
from reasonvqa.tasks.questions.subject_types import class_memberships, typed_facts
from tests.tasks.questions.conftest import item


def _frame(rows):
    return pl.from_arrow(schemas.from_rows(rows, schemas.FACTS))


def test_membership_follows_instance_of_then_subclass_chains():
    facts = _frame([
        item("Q243", "Eiffel Tower", "P31", "Q1440476", "lattice tower"),
        item("Q1440476", "lattice tower", "P279", "Q12518", "tower", hop=4),
        item("Q12518", "tower", "P279", "Q811979", "architectural structure", hop=4),
        item("Q811979", "architectural structure", "P279", "Q12518", "tower", hop=4),  # a cycle ends the walk
        item("Q1420", "car", "P279", "Q752870", "motor vehicle"),  # a class: its superclasses are its types
        item("Q752870", "motor vehicle", "P279", "Q42889", "vehicle", hop=4),
    ])
    got = class_memberships(facts, {"Q12518", "Q811979", "Q42889", "Q41176"})
    pairs = set(zip(got["subject_qid"].to_list(), got["class_qid"].to_list()))
    assert {("Q243", "Q12518"), ("Q243", "Q811979"), ("Q1420", "Q42889")} <= pairs
    assert ("Q243", "Q41176") not in pairs and ("Q1420", "Q12518") not in pairs


def test_facts_of_subjects_that_do_not_fit_are_dropped(bank):
    facts = _frame([
        item("Q41176", "building", "P279", "Q811979", "architectural structure"),
        item("Q41176", "building", "P2175", "Q12136", "disease"),  # a mislinked fact: buildings treat nothing
        item("Q18216", "aspirin", "P31", "Q12140", "medication"),
        item("Q18216", "aspirin", "P2175", "Q133780", "pain"),
        item("Q18216", "aspirin", "P138", "Q1", "spiraea"),  # named after: any subject fits
        item("Q999", None, "P2175", "Q133780", "pain"),  # no P31/P279: the type is unknown
    ])
    templates = {pid: bank.properties[pid] for pid in ("P2175", "P138")}
    kept = typed_facts(facts.filter(pl.col("property_id").is_in(list(templates))), templates,
                       class_memberships(facts, {"Q12140"}))
    assert sorted(zip(kept["subject_qid"].to_list(), kept["property_id"].to_list())) == [("Q18216", "P138"), ("Q18216", "P2175")]


def test_no_route_reads_the_medical_condition_treated_by_a_building(bank):
    facts = schemas.from_rows([
        item("Q243", "Eiffel Tower", "P31", "Q12518", "tower"),
        item("Q243", "Eiffel Tower", "P17", "Q142", "France"),
        item("Q243", "Eiffel Tower", "P2175", "Q12136", "disease"),
        item("Q142", "France", "P31", "Q6256", "country", hop=2),
        item("Q142", "France", "P36", "Q90", "Paris", hop=2),
        item("Q142", "France", "P2175", "Q12136", "disease", hop=2),
    ], schemas.FACTS)
    index = build_index(facts, bank, QuestionConfig())
    routes = set(index.routes["route_key"].to_list())
    assert {"P17", "P17>P36"} <= routes
    assert not {r for r in routes if "P2175" in r}
    assert index.stats["facts_subject_type_mismatch"] == 2
