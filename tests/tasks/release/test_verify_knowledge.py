"""verify checks the knowledge a release carries: present for template questions, dated, covering each route."""

import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.release.verify import verify_release
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.release.conftest import question

DATE = "2026-12-01"
MIRROR = "oxigraph-mirror:sha256:ab12"


def _fact(subject, prop, hop, value_qid=None, label=None, amount=None, unit=None, fetched_on=DATE):
    return {"subject_qid": subject, "subject_label": subject.lower(), "property_id": prop, "hop": hop,
            "value_type": "item" if value_qid else "quantity", "value_qid": value_qid, "value_label": label,
            "amount": amount, "unit_qid": unit, "unit_label": "metre" if unit else None, "rank": "normal",
            "fetched_from": MIRROR, "fetched_on": fetched_on}


FACTS = [
    _fact("Q243", "P17", 1, "Q142", "France"),  # Eiffel Tower -> France
    _fact("Q142", "P36", 2, "Q90", "Paris"),  # France -> Paris
    _fact("Q513", "P2048", 1, amount=8848.86, unit="Q11573"),  # Mount Everest: height
    _fact("Q82425", "P17", 1, "Q45", "Portugal"),  # Belem Tower -> Portugal
    _fact("Q45", "P36", 2, "Q597", "Lisbon"),
]
LINKS = [("vg:1/o1", "vg:1", "Q243"), ("gldv2:7e/o1", "gldv2:7e", "Q513"), ("vg:2/o1", "vg:2", "Q82425")]


def _questions():
    train = [
        question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"], answer_qid="Q90", kind="template"),
        question("q3", "gldv2:7e", "8,849 m", ["8,849 m", "8,000 m", "7,500 m", "9,100 m"], answer_category="number",
                 n_hop=1, route=["P2048"], property_id="P2048", kind="template"),
    ]
    test = [question("q2", "vg:2", "Lisbon", ["Porto", "Lisbon", "Braga", "Faro"], answer_qid="Q597", kind="template")]
    return {"train": schemas.from_rows(train, schemas.QUESTIONS), "test": schemas.from_rows(test, schemas.QUESTIONS)}


def _release(tmp_path, facts=FACTS, tables=("knowledge", "knowledge_queries", "entity_links"), date=DATE):
    splits = _questions()
    links = schemas.from_rows([{"object_id": o, "image_id": i, "qid": q, "method": "wordnet:p8814", "hypernym_depth": 0}
                               for o, i, q in LINKS], schemas.ENTITY_LINKS)
    answers = pa.table({"query": ["SELECT ?item ?label WHERE {}"], "answer": ["[]"]}, schema=schemas.KNOWLEDGE_QUERIES)
    available = {"knowledge": schemas.from_rows(facts, schemas.KNOWLEDGE), "knowledge_queries": answers,
                 "entity_links": links}
    return write_release(tmp_path, "demo", "1.0.0", splits, pool=pa.concat_tables(list(splits.values())),
                         stats_dir=None, config={"knowledge": {"endpoint": None}},
                         inputs={"knowledge": "sha256:ab12", "knowledge_date": date},
                         tables={name: available[name] for name in tables} or None)


def test_a_release_whose_knowledge_covers_every_template_question_verifies(tmp_path):
    release = _release(tmp_path)
    assert verify_release(release) == []
    card = (release / "README.md").read_text()
    assert f"Wikidata knowledge as of **{DATE}**" in card
    assert "reasonvqa build --knowledge-from <this folder> --out <folder>" in card
    assert "`knowledge/` holds the 5 facts" in card


def test_a_missing_hop_is_reported_with_the_first_question_it_leaves_uncovered(tmp_path):
    facts = [f for f in FACTS if f["subject_qid"] != "Q45"]  # Portugal's capital is gone
    problems = verify_release(_release(tmp_path, facts))
    assert problems == ["knowledge: 1 template questions whose facts it does not hold (first: q2, route "
                        "['P17', 'P36'] from objects ['vg:2/o1'])"]


def test_an_item_answer_must_be_a_value_of_the_last_fact(tmp_path):
    facts = [{**f, "value_qid": "Q1748"} if f["subject_qid"] == "Q142" else f for f in FACTS]  # France -> Copenhagen
    problems = verify_release(_release(tmp_path, facts))
    assert problems == ["knowledge: 1 template questions whose facts it does not hold (first: q1, route "
                        "['P17', 'P36'] from objects ['vg:1/o1'])"]


@pytest.mark.parametrize("tables, missing", [((), "knowledge, knowledge_queries, entity_links"),
                                             (("entity_links", "knowledge"), "knowledge_queries")])
def test_a_built_release_with_template_questions_must_carry_its_knowledge(tmp_path, tables, missing):
    problems = verify_release(_release(tmp_path, tables=tables))
    assert problems[0] == (f"manifest.json: 3 template questions but no {missing} table(s): a release carries "
                           "the knowledge its questions used")


def test_facts_dated_otherwise_than_the_manifest_are_reported(tmp_path):
    problems = verify_release(_release(tmp_path, date="2026-12-02"))
    assert problems == ["knowledge: 5 facts fetched on another date than the knowledge_date input '2026-12-02'"]
