"""End to end: literal tables of two landmark photos and one Visual Genome scene -> questions."""

from __future__ import annotations

import hashlib
import io
import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.index import build_index
from reasonvqa.tasks.questions.templated import generate_questions

TOWER, MOUNTAIN = "gldv2:7e4627eb6f721857", "gldv2:0a1b2c3d4e5f6789"

# (question, answer, category, hops, scene graph) for each answer category and hop count (dates at 1 hop:
# see test_no_distractors_outside_the_real_range_or_the_answers_kind)
EXPECTED = [
    ("In which country is this lattice tower?", "France", "literal", 1, False),
    ("Who discovered or invented the motor vehicle parked next to the sidewalk?", "Carl Benz", "literal", 1, True),
    ("On which continent is this mountain?", "Asia", "fixed", 1, False),
    ("What is the elevation above sea level of this mountain?", "8,849 m", "number", 1, False),
    ("What is the capital of the country where this lattice tower is located?", "Paris", "literal", 2, False),
    ("On which continent is the country where this lattice tower is located?", "Europe", "fixed", 2, False),
    ("What is the population of the country where this lattice tower is located as of 2023?", "68,373,433", "number", 2, False),
    ("When was the architect of this lattice tower born?", "26 December 1847", "date", 2, False),
    ("When was the discoverer or inventor of the motor vehicle parked next to the sidewalk born?", "25 November 1844", "date", 2, True),
    ("What is the capital of the country of citizenship of the architect of this lattice tower?", "Paris", "literal", 3, False),
    ("In which country is the birthplace of the discoverer or inventor of the motor vehicle parked next to the sidewalk?", "Germany",
     "literal", 3, True),
    ("On which continent is the country of citizenship of the architect of this lattice tower?", "Europe", "fixed", 3, False),
    ("What is the population of the capital of the country where this lattice tower is located as of 2021?", "2,102,650",
     "number", 3, False),
    ("When was the country of citizenship of the architect of this lattice tower established?", "843", "date", 3, False),
]


@pytest.fixture()
def inputs(images, objects, relations, links, facts):
    return dict(images=images, objects=objects, relations=relations, links=links, facts=facts)


def _run(inputs, bank, config=None, seed=0, **kwargs):
    return generate_questions(**inputs, bank=bank, config=config or QuestionConfig(), seed=seed, shard=3,
                              knowledge_snapshot="sample-2026-02", **kwargs)


def _questions(result) -> pl.DataFrame:
    return pl.from_arrow(result.outputs["questions"])


def test_rendered_questions_for_each_category_and_hop_count(inputs, bank):
    q = _questions(_run(inputs, bank))
    got = {(r["question"], r["answer"], r["answer_category"], r["n_hop"], r["has_scene_graph"]) for r in q.iter_rows(named=True)}
    for expected in EXPECTED:
        assert expected in got, expected


def test_no_distractors_outside_the_real_range_or_the_answers_kind(inputs, bank):
    """The fact table holds one height, one day-precision inception, one invention year and one birthplace of a known kind (Mühlburg, a human
    settlement; the other birthplaces have no P31): a distractor would lie outside the real values or
    be of another kind, so these questions are rejected, each with its reason."""
    result = _run(inputs, bank)
    reasons = {(json.loads(r["record"])["route_key"], r["reason"]) for r in result.rejects.rows}
    assert {("P2048", "too_few_distractors"), ("P571", "too_few_distractors"),
            ("P575", "too_few_distractors"), ("P61>P19", "too_few_distractors")} <= reasons
    # "What kind of thing is the architect ...?": the class human has no P31/P279 of its own here (the
    # answer "country" of P17>P31 is in its question: that reason comes first)
    assert {("P84>P31", "answer_kind_unknown"), ("P61>P31", "answer_kind_unknown"), ("P17>P31", "answer_in_question")} <= reasons
    q = _questions(result)
    assert not q.filter(pl.col("route").list.last() == "P31").height


def test_release_columns_and_provenance(inputs, bank):
    result = _run(inputs, bank)
    table = result.outputs["questions"]
    assert table.schema == schemas.QUESTIONS
    q = pl.from_arrow(table)
    row = q.filter(pl.col("question") == "What is the capital of the country where this lattice tower is located?").row(0, named=True)
    assert row["route"] == ["P17", "P36"] and row["property_id"] == "P36" and row["n_hop"] == 2
    assert row["template_ids"] == ["P17:sub", "P36:main"]
    assert row["domains"] == ["Places & Locations", "Physical Geography", "Politics & Ideologies"]
    assert row["answer_qid"] == "Q90" and row["image_id"] == TOWER and row["image_source"] == "gldv2"
    assert row["object_ids"] == [f"{TOWER}/o0"]
    assert row["template_version"] == bank.version and row["knowledge_snapshot"] == "sample-2026-02"
    key = "\x1f".join([TOWER, f"{TOWER}/o0", "P17>P36", bank.version]).encode()
    assert row["question_id"] == hashlib.blake2b(key, digest_size=18).hexdigest()[:20]
    dated = q.filter(pl.col("answer_category") == "number")
    assert dated["answer_qid"].null_count() == dated.height
    assert set(q["image_source"]) == {"vg", "gldv2"}
    assert q["question_id"].to_list() == sorted(q["question_id"].to_list())


def test_every_choice_list_holds_the_answer_and_three_distinct_distractors(inputs, bank):
    q = _questions(_run(inputs, bank))
    assert q.height >= len(EXPECTED)
    for row in q.iter_rows(named=True):
        choices = row["choices"]
        assert len(choices) == 4 and row["answer"] in choices and row["answer"].strip()
        normalized = {" ".join(c.lower().replace(",", " ").split()) for c in choices}
        assert len(normalized) == 4, choices
        assert row["question"].endswith("?") and row["question"].count("?") == 1 and "  " not in row["question"]
        assert row["question"][0].isupper()


def test_fixed_distractors_come_from_the_closed_set(inputs, bank):
    q = _questions(_run(inputs, bank)).filter(pl.col("property_id") == "P30")
    closed = {c.label for c in bank.properties["P30"].choices}
    assert q.height >= 3 and all(set(c) <= closed for c in q["choices"].to_list())


def test_literal_distractors_come_from_the_same_property(inputs, bank):
    q = _questions(_run(inputs, bank)).filter(pl.col("property_id") == "P36")
    capitals = {"Paris", "Berlin", "Rome", "Madrid", "Tokyo", "Washington, D.C."}
    assert q.height >= 2 and all(set(c) <= capitals for c in q["choices"].to_list())


def test_every_candidate_is_a_question_or_a_reject_with_a_reason(inputs, bank):
    result = _run(inputs, bank)
    assert result.rows_in == result.outputs["questions"].num_rows + len(result.rejects)
    reasons = {}
    for row in result.rejects.rows:
        record = json.loads(row["record"])
        reasons.setdefault(row["reason"], []).append(record)
        assert row["stage"] == "questions" and row["shard"] == 3
        assert row["source"].startswith(f"image={record['image_id']} objects=") and record["route_key"] in row["source"]
    # two truthy owners of the tower, two preferred countries of Everest
    assert {r["route_key"] for r in reasons["multiple_answers"]} >= {"P127", "P17"}
    # the heritage designation item has no English label
    assert [r["route_key"] for r in reasons["no_english_label"]] == ["P1435"]
    # the wall is named by its synset's lemma ("this wall", not its label "brick wall"): no answer in the question
    # (what kind of thing the country of ... is -> "country": the answer is in the question)
    wall = [r for r in reasons.get("answer_in_question", []) if r["object_ids"][0] == "vg:1/o1058534"]
    assert wall == [] and all(r["route_key"].endswith("P31") for r in reasons["answer_in_question"])
    # the only architect in the fact table cannot have three distractors
    assert "P84" in {r["route_key"] for r in reasons["too_few_distractors"]}
    q = _questions(result)
    assert not q.filter(pl.col("property_id").is_in(["P127", "P1435", "P84"]) & (pl.col("n_hop") == 1)).height


def test_unlabeled_values_count_in_the_single_answer_check(inputs, bank, facts):
    """A second value without an English label still makes the fact multi-valued (it is never offered)."""
    from tests.tasks.questions.conftest import fact_rows, item

    rows = fact_rows() + [item("Q243", "Eiffel Tower", "P186", "Q5", None)]
    result = _run({**inputs, "facts": schemas.from_rows(rows, schemas.FACTS)}, bank)
    material = [json.loads(r["record"]) for r in result.rejects.rows if r["reason"] == "multiple_answers"]
    assert "P186" in {r["route_key"] for r in material if r["image_id"] == TOWER}
    assert not _questions(result).filter((pl.col("route").list.join(">") == "P186") & (pl.col("image_id") == TOWER)).height


def test_time_varying_values_need_their_point_in_time(inputs, bank):
    from tests.tasks.questions.conftest import fact_rows

    rows = [dict(r, point_in_time=None) if r["property_id"] == "P1082" else r for r in fact_rows()]
    result = _run({**inputs, "facts": schemas.from_rows(rows, schemas.FACTS)}, bank)
    assert not _questions(result).filter(pl.col("property_id") == "P1082").height
    undated = [json.loads(r["record"])["route_key"] for r in result.rejects.rows if r["reason"] == "no_point_in_time"]
    assert "P17>P1082" in undated
    # never an inner hop: no sub-clause "the head of government of ..." without a date
    assert not [k for k in undated + _questions(result)["route"].list.join(">").to_list() if "P6>" in k or "P35>" in k]


def test_routes_through_the_naming_property_are_no_candidates(inputs, bank):
    result = _run(inputs, bank)
    # "What is the motor vehicle parked next to the sidewalk a subclass of?" -> "motor vehicle"; P31 of the tower
    assert result.extra["questions"]["routes_through_naming_property"] >= 2
    q = _questions(result)
    assert not q.filter(pl.col("route").list.first().is_in(["P279", "P31"])).height


def test_reruns_are_byte_identical_and_the_seed_only_moves_choices(inputs, bank):
    def parquet_bytes(table: pa.Table) -> bytes:
        sink = io.BytesIO()
        pq.write_table(table, sink)
        return sink.getvalue()

    first, again = _run(inputs, bank), _run(inputs, bank)
    assert parquet_bytes(first.outputs["questions"]) == parquet_bytes(again.outputs["questions"])
    assert first.rejects.rows == again.rejects.rows
    other = _questions(_run(inputs, bank, seed=7))
    base = _questions(first)
    assert base["question_id"].to_list() == other["question_id"].to_list()
    assert base["answer"].to_list() == other["answer"].to_list()
    assert base["choices"].to_list() != other["choices"].to_list()


def test_sharding_does_not_change_questions(inputs, bank):
    whole = _questions(_run(inputs, bank))
    index = build_index(inputs["facts"], bank, QuestionConfig())
    parts = []
    for image_id in [TOWER, MOUNTAIN, "vg:1"]:
        shard = {
            name: (pl.from_arrow(t).filter(pl.col("image_id") == image_id).to_arrow() if name != "facts" else t)
            for name, t in inputs.items()
        }
        parts.append(_questions(_run(shard, bank, index=index)))
    assert pl.concat(parts).sort("question_id").equals(whole)


def test_domain_filter_only_asks_the_domains_properties(inputs, bank):
    config = QuestionConfig(domains=["characteristics"])
    q = _questions(_run(inputs, bank, config))
    # the tower's height is the only one known: no distractor inside the real range (rejected)
    assert sorted(q["question"].to_list()) == ["What is the elevation above sea level of this mountain?"]
    allowed = set(bank.question_property_ids(["Characteristics & Properties"]))
    assert all(set(route) <= allowed for route in q["route"].to_list())
    # P2044 is also Physical Geography: a restricted build tags only the selected domains
    assert q["domains"].to_list() == [["Characteristics & Properties"]]


def test_hop_limit_and_per_image_cap(inputs, bank):
    q = _questions(_run(inputs, bank, QuestionConfig(max_hops=1)))
    assert set(q["n_hop"]) == {1}
    result = _run(inputs, bank, QuestionConfig(max_questions_per_image=2))
    capped = _questions(result)
    assert capped.group_by("image_id").len()["len"].max() == 2
    full = _questions(_run(inputs, bank))
    expected = full.sort("question_id").group_by("image_id", maintain_order=True).head(2)
    assert sorted(capped["question_id"]) == sorted(expected["question_id"])
    assert sum(r["reason"] == "over_image_cap" for r in result.rejects.rows) == full.height - capped.height


def test_an_index_for_other_settings_is_refused(inputs, bank):
    index = build_index(inputs["facts"], bank, QuestionConfig(max_hops=1))
    with pytest.raises(ValueError, match="max_hops"):
        _run(inputs, bank, QuestionConfig(max_hops=3), index=index)


def test_a_shard_without_linked_objects_gives_an_empty_table(inputs, bank):
    empty = dict(inputs, links=schemas.empty(schemas.ENTITY_LINKS), relations=schemas.empty(schemas.RELATIONS))
    result = _run(empty, bank)
    assert result.rows_in == 0 and len(result.rejects) == 0
    assert result.outputs["questions"].num_rows == 0 and result.outputs["questions"].schema == schemas.QUESTIONS


def test_a_question_that_starts_with_the_object_is_capitalized(inputs, tmp_path):
    import shutil

    from reasonvqa.paths import TEMPLATES_DIR
    from reasonvqa.tasks.questions.bank import load_bank

    copy = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = copy / "properties" / "places.yaml"
    path.write_text(path.read_text().replace("main: What is the elevation above sea level of {subject}?",
                                             "main: '{subject} has which elevation above sea level?'"))
    bank = load_bank(copy)
    q = _questions(_run(inputs, bank))
    assert "This mountain has which elevation above sea level?" in q["question"].to_list()
    assert q["template_version"][0] == bank.version


def test_a_multi_hop_question_that_starts_with_a_sub_clause_is_capitalized(inputs, tmp_path):
    import shutil

    from reasonvqa.paths import TEMPLATES_DIR
    from reasonvqa.tasks.questions.bank import load_bank

    copy = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = copy / "properties" / "places.yaml"
    path.write_text(path.read_text().replace("main: What is the capital of {subject}?", "main: '{subject} has which capital?'"))
    q = _questions(_run(inputs, load_bank(copy)))
    assert "The country where this lattice tower is located has which capital?" in q["question"].to_list()
    assert all(text[0].isupper() for text in q["question"].to_list())


def test_a_question_has_the_same_choices_on_every_image(inputs, bank):
    """Choices are drawn per (linked item, route): a second photo of the tower gets the same choice set."""
    import pyarrow as pa

    other = "gldv2:ffffffffffffffff"

    def copy(table, id_cols):
        rows = [r for r in table.to_pylist() if r["image_id"] == TOWER]
        for r in rows:
            for c in id_cols:
                r[c] = r[c].replace(TOWER, other)
        return pa.concat_tables([table, schemas.from_rows(rows, table.schema)])

    doubled = dict(inputs, images=copy(inputs["images"], ["image_id"]), objects=copy(inputs["objects"], ["image_id", "object_id"]),
                   links=copy(inputs["links"], ["image_id", "object_id"]))
    q = _questions(_run(doubled, bank))
    a = q.filter(pl.col("image_id") == TOWER).select("question", choices=pl.col("choices").list.sort())
    b = q.filter(pl.col("image_id") == other).select("question", choices=pl.col("choices").list.sort())
    assert a.height > 5 and a.sort("question").equals(b.sort("question"))
    assert set(q.filter(pl.col("image_id") == TOWER)["question_id"]).isdisjoint(q.filter(pl.col("image_id") == other)["question_id"])
