"""Literal item answers: distractors of the answer's own kind (P31; a class: its P279 superclasses)."""

from __future__ import annotations

import polars as pl

from reasonvqa import schemas
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.fact_choices import fact_choices
from reasonvqa.tasks.questions.index import build_index, item_kinds

from .conftest import item

# Namesakes of three landmarks (hop 1), the namesakes' and other items' P31 (hop 2), and the
# classes' P279 (hop 3, as the facts stage fetches class chains). The P31 pool mixes people's
# classes with places' classes: the question "What kind of thing is the namesake of this mountain?"
# must offer only the classes of people.
FACTS = [
    item("Q513", "Mount Everest", "P31", "Q8502", "mountain"),
    item("Q513", "Mount Everest", "P31", "Q570116", "tourist attraction"),
    item("Q513", "Mount Everest", "P138", "Q217119", "George Everest"),
    item("Q513", "Mount Everest", "P17", "Q837", "Nepal"),
    item("Q243", "Eiffel Tower", "P31", "Q12518", "tower"),
    item("Q243", "Eiffel Tower", "P31", "Q570116", "tourist attraction"),
    item("Q243", "Eiffel Tower", "P138", "Q20882", "Gustave Eiffel"),
    item("Q243", "Eiffel Tower", "P17", "Q142", "France"),
    item("Q5451", "Himalayas", "P31", "Q46831", "mountain range", hop=2),
    item("Q5451", "Himalayas", "P138", "Q12345", "snow", hop=2),
    item("Q217119", "George Everest", "P31", "Q5", "human", hop=2),
    item("Q20882", "Gustave Eiffel", "P31", "Q5", "human", hop=2),
    item("Q4", "Sherlock Holmes", "P31", "Q15632617", "fictional human", hop=2),
    item("Q11", "Zeus", "P31", "Q178885", "deity", hop=2),
    item("Q6", "Sun Wukong", "P31", "Q15410431", "mythical character", hop=2),
    item("Q46", "Europe", "P31", "Q5107", "continent", hop=2),
    item("Q837", "Nepal", "P31", "Q6256", "country", hop=2),
    item("Q142", "France", "P31", "Q6256", "country", hop=2),
    item("Q29", "Spain", "P31", "Q6256", "country", hop=2),
    item("Q45", "Portugal", "P31", "Q6256", "country", hop=2),
    item("Q90", "Paris", "P31", "Q515", "city", hop=2),
    # P17 values of other kinds, as Wikidata holds them now and then (a city, a continent)
    item("Q7", "Montmartre", "P17", "Q90", "Paris", hop=2),
    item("Q8", "Alps", "P17", "Q46", "Europe", hop=2),
    item("Q9", "Sagrada Família", "P17", "Q29", "Spain", hop=2),
    item("Q10", "Belém Tower", "P17", "Q45", "Portugal", hop=2),
    *(item(q, None, "P31", "Q12518", "tower", hop=2) for q in ("Q7", "Q8", "Q9", "Q10")),
    item("Q5", "human", "P279", "Q215627", "person", hop=3),
    item("Q15632617", "fictional human", "P279", "Q215627", "person", hop=3),
    item("Q178885", "deity", "P279", "Q215627", "person", hop=3),
    item("Q15410431", "mythical character", "P279", "Q215627", "person", hop=3),
    item("Q8502", "mountain", "P279", "Q271669", "landform", hop=3),
    item("Q46831", "mountain range", "P279", "Q271669", "landform", hop=3),
    item("Q5107", "continent", "P279", "Q271669", "landform", hop=3),
    item("Q6256", "country", "P279", "Q1048835", "political territorial entity", hop=3),
    item("Q515", "city", "P279", "Q486972", "human settlement", hop=3),
]


def _choices(rows, bank) -> pl.DataFrame:
    config = QuestionConfig()
    index = build_index(schemas.from_rows(rows, schemas.FACTS), bank, config)
    choices = fact_choices(index, 7, bank, config)
    return pl.concat([index.facts.select("property_id", "value_label"), choices], how="horizontal")


def _options(frame: pl.DataFrame, pid: str, answer: str) -> set[str]:
    row = frame.filter(pl.col("property_id") == pid, pl.col("value_label") == answer).row(0, named=True)
    assert row["fact_reason"] is None and not row["few"], row
    return {row["d1"], row["d2"], row["d3"]}


def test_what_kind_of_thing_offers_only_classes_of_the_answers_kind(bank):
    frame = _choices(FACTS, bank)
    # the namesake is a human: the distractors are the other classes of persons, never "mountain range"
    assert _options(frame, "P31", "human") == {"fictional human", "deity", "mythical character"}


def test_an_item_answer_draws_only_items_of_its_kind(bank):
    frame = _choices(FACTS, bank)
    for country in ("France", "Nepal"):
        options = _options(frame, "P17", country)
        assert options <= {"France", "Nepal", "Spain", "Portugal"} - {country} and len(options) == 3


def test_an_answer_of_no_known_kind_gets_a_reason(bank):
    rows = [r for r in FACTS if not (r["subject_qid"] == "Q5" and r["property_id"] == "P279")]
    frame = _choices(rows, bank)
    human = frame.filter(pl.col("property_id") == "P31", pl.col("value_label") == "human").row(0, named=True)
    assert human["few"] and human["few_reason"] == "answer_kind_unknown"
    # too few of its kind: without deity's superclass only two other classes of persons are left
    rows = [r for r in FACTS if not (r["subject_qid"] == "Q178885" and r["property_id"] == "P279")]
    human = _choices(rows, bank).filter(pl.col("property_id") == "P31", pl.col("value_label") == "human").row(0, named=True)
    assert human["few"] and human["few_reason"] == "too_few_distractors"


def test_item_kinds_are_p31_classes_else_p279_superclasses_never_vague_ones(bank):
    clean = pl.from_arrow(schemas.from_rows(FACTS, schemas.FACTS)).with_columns(value_kind=pl.lit("item"))
    kinds = item_kinds(clean, bank.naming_avoid)
    got = {q: sorted(k) for q, k in kinds.group_by("qid").agg("kind").iter_rows()}
    assert got["Q513"] == ["Q8502"]  # "tourist attraction" tells a mountain and a tower apart from nothing
    assert got["Q5"] == ["Q215627"] and got["Q11"] == ["Q178885"]
    assert got["Q15632617"] == ["Q215627"] and got["Q8502"] == ["Q271669"]
