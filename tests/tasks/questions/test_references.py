"""How objects are named and when a reference is unambiguous enough to ask about."""

from __future__ import annotations

import polars as pl

from reasonvqa import schemas
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.index import build_index
from reasonvqa.tasks.questions.references import build_references


def _refs(bank, facts, objects, relations, links, **config):
    cfg = QuestionConfig(**config)
    index = build_index(facts, bank, cfg)
    refs, stats = build_references(objects, relations, links, index.class_names, bank, cfg)
    return refs.sort("image_id", "phrase"), stats


def test_names_come_from_the_class_not_the_item(bank, facts, objects, relations, links):
    refs, stats = _refs(bank, facts, objects, relations, links)
    phrases = dict(zip(refs["phrase"], refs["object_ids"].to_list()))
    # landmarks: instance-of, skipping the vague "tourist attraction"
    assert phrases["this lattice tower"] == ["gldv2:7e4627eb6f721857/o0"]
    assert phrases["this mountain"] == ["gldv2:0a1b2c3d4e5f6789/o0"]
    # car and bus are both "motor vehicle": "this motor vehicle" would be ambiguous
    assert not any(p.startswith("this motor vehicle") for p in phrases)
    assert stats["ambiguous_names"] == 2
    # the relation singles the car out; both car objects are linked to the same item
    assert phrases["the motor vehicle parked next to the sidewalk"] == ["vg:1/o1058529", "vg:1/o1058530"]
    # "on the street" fits the car and the bus: dropped
    assert not any("on the street" in p for p in phrases)
    assert stats["ambiguous_scene_graph_phrases"] == 1
    sg = refs.filter(pl.col("has_scene_graph"))["phrase"].to_list()
    assert sg == ["the motor vehicle parked next to the sidewalk"]


def test_this_reference_covers_every_object_of_the_item(bank, facts, objects, links):
    no_relations = schemas.empty(schemas.RELATIONS)
    only_car = pl.from_arrow(links).filter(pl.col("qid") != "Q5638").to_arrow()
    refs, _ = _refs(bank, facts, objects, no_relations, only_car)
    row = refs.filter(pl.col("phrase") == "this motor vehicle").row(0, named=True)
    assert row["object_ids"] == ["vg:1/o1058529", "vg:1/o1058531"] and row["has_scene_graph"] is False


def test_fallback_names_without_class_facts(bank, objects, links):
    no_facts = schemas.empty(schemas.FACTS)
    refs, _ = _refs(bank, no_facts, objects, schemas.empty(schemas.RELATIONS), links, fallback_class_name="place")
    # a Visual Genome object without class facts is named by its synset's lemma (wall.n.01), not its label "brick wall"
    assert sorted(refs["phrase"].to_list()) == ["this bus", "this car", "this place", "this place", "this wall"]


def test_object_words_are_singular_synset_lemmas_with_the_label_as_fallback(bank, facts, links):
    from tests.tasks.questions.conftest import vg_object

    objects = schemas.from_rows([
        vg_object(1058529, "car", "car.n.01"), vg_object(7, "books", "book.n.01"), vg_object(8, "pluged", "plug.n.01"),
        vg_object(9, "Teddy Bears", "teddy_bear.n.01"), vg_object(10, "thingy", None),
    ], schemas.OBJECTS)

    def rel(n, obj, label):
        return dict(relation_id=f"vg:1/r{n}", image_id="vg:1", subject_id="vg:1/o1058529", object_id=f"vg:1/o{obj}",
                    predicate=f"near{'' if n == 1 else ' by' * (n - 1)}", subject_label="car", object_label=label)

    relations = schemas.from_rows([rel(1, 7, "books"), rel(2, 8, "pluged"), rel(3, 9, "Teddy Bears"), rel(4, 10, "thingy")],
                                  schemas.RELATIONS)
    only_car = pl.from_arrow(links).filter(pl.col("qid") == "Q1420").to_arrow()
    refs, _ = _refs(bank, facts, objects, relations, only_car, max_scene_graph_refs=4)
    assert sorted(refs.filter(pl.col("has_scene_graph"))["phrase"].to_list()) == [
        "the motor vehicle near by by by the thingy", "the motor vehicle near by by the teddy bear",
        "the motor vehicle near by the plug", "the motor vehicle near the book",
    ]


def test_predicates_read_as_noun_phrase_modifiers(bank, facts, objects, links):
    def rel(n, predicate):
        return dict(relation_id=f"vg:1/r{n}", image_id="vg:1", subject_id="vg:1/o1058529", object_id="vg:1/o1058530",
                    predicate=predicate, subject_label="car", object_label="Sidewalk ")

    only_car = pl.from_arrow(links).filter(pl.col("qid") != "Q5638").to_arrow()
    cases = {"has": "with", "Wears": "wearing", "holds": "holding", "sits": "that sits", "is near": "near",
             "sitting on a": "sitting on",
             "sits on": "that sits on", "hangs from the": "that hangs from", "across from": "across from"}
    for n, (predicate, phrase) in enumerate(cases.items()):
        relations = schemas.from_rows([rel(n, predicate)], schemas.RELATIONS)
        refs, _ = _refs(bank, facts, objects, relations, only_car)
        sg = refs.filter(pl.col("has_scene_graph"))["phrase"].to_list()
        assert sg == [f"the motor vehicle {phrase} the sidewalk"], predicate
    for predicate in ["is", "parked in the shade of a big", "2 feet from"]:
        refs, stats = _refs(bank, facts, objects, schemas.from_rows([rel(9, predicate)], schemas.RELATIONS), only_car)
        assert not refs["has_scene_graph"].any() and stats["relations_unusable"] == 1


def test_scene_graph_clauses_can_be_switched_off_and_limited(bank, facts, objects, relations, links):
    refs, _ = _refs(bank, facts, objects, relations, links, scene_graph_clauses=False)
    assert not refs["has_scene_graph"].any()
    refs, _ = _refs(bank, facts, objects, relations, links, max_scene_graph_refs=0)
    assert not refs["has_scene_graph"].any()


def test_related_pairs_in_both_directions_are_different_references(bank, facts, objects, links):
    sidewalk = dict(object_id="vg:1/o1058530", image_id="vg:1", qid="Q177749", label="sidewalk", method="wordnet:p8814",
                    synset="sidewalk.n.01", hypernym_depth=0)
    car_and_sidewalk = pl.concat([
        pl.from_arrow(links).filter(pl.col("qid") == "Q1420"),
        pl.from_arrow(schemas.from_rows([sidewalk], schemas.ENTITY_LINKS)),
    ]).to_arrow()

    def rel(n, s, o, predicate):
        return dict(relation_id=f"vg:1/r{n}", image_id="vg:1", subject_id=f"vg:1/o{s}", object_id=f"vg:1/o{o}",
                    predicate=predicate, object_label="sidewalk" if o == 1058530 else "car")

    relations = schemas.from_rows([rel(1, 1058529, 1058530, "parked next to"), rel(2, 1058530, 1058529, "next to")],
                                  schemas.RELATIONS)
    refs, _ = _refs(bank, facts, objects, relations, car_and_sidewalk)
    sg = dict(zip(*refs.filter(pl.col("has_scene_graph")).select("phrase", "object_ids").to_dict(as_series=False).values()))
    assert sg == {
        "the motor vehicle parked next to the sidewalk": ["vg:1/o1058529", "vg:1/o1058530"],
        "the sidewalk next to the car": ["vg:1/o1058530", "vg:1/o1058529"],
    }
