"""Identification by position ("What is the object to the left of the bus?") and its hallucination counterpart,
on literal regions of an 800x600 Visual Genome-like image."""

from __future__ import annotations

from reasonvqa.tasks.questions.absence import AbsentLabel
from reasonvqa.tasks.questions.grounded import references
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.hallucination import hallucination_candidates, identification_slots
from reasonvqa.tasks.questions.position_identification import TEMPLATE_ID, position_identifications
from reasonvqa.tasks.questions.regions import Region

IMAGE = {"image_id": "vg:3", "width": 800, "height": 600}
CONFIG = GroundedConfig()


def region(n: int, label: str | None, x: float, y: float, w: float, h: float, synset: str | None = None) -> Region:
    return Region(f"vg:3/g{n}", "vg:3", label, x, y, w, h, w * h, "annotation:vg", synset=synset)


def scene() -> list[Region]:
    # a bus in the middle, one tree far to its left, a lamp above it, two benches below it (several instances),
    # a car clearly right of it and a sign right of its edge but within the margin (16 px of 800)
    return [region(1, "bus", 300, 200, 200, 150, "bus.n.01"), region(2, "tree", 20, 180, 80, 200, "tree.n.01"),
            region(3, "lamp", 360, 20, 40, 60, "lamp.n.01"), region(4, "bench", 320, 450, 60, 40, "bench.n.01"),
            region(5, "bench", 420, 460, 60, 40, "bench.n.01"), region(6, "signboard", 505, 240, 20, 30, "signboard.n.01"),
            region(7, "car", 650, 250, 100, 60, "car.n.01")]


def asked(candidates):
    return {c.question: (c.answer, c.reason, c.evidence) for c in candidates}


def test_one_object_clearly_on_one_side_answers_and_near_or_several_do_not():
    regions = scene()
    got = asked(position_identifications(regions, references(regions), IMAGE, CONFIG))
    assert got["What is the object to the left of the bus?"] == ("tree", None, ["vg:3/g2", "vg:3/g1"])
    assert got["What is the object above the bus?"] == ("lamp", None, ["vg:3/g3", "vg:3/g1"])
    # the car is clearly right of the bus, the sign's centre too but within the margin of the edge: not one answer
    assert got["What is the object to the right of the bus?"] == ("car", "ambiguous_spatial", ["vg:3/g7", "vg:3/g1"])
    # two benches below the bus, not duplicates of one box: "the object" would not be one
    assert got["What is the object below the bus?"] == ("bench", "several_objects", ["vg:3/g4", "vg:3/g5", "vg:3/g1"])
    assert "What is the object to the right of the tree?" not in got  # objects of several classes there
    assert all(c.template_id == TEMPLATE_ID and c.form.startswith("identify ") for c in
               position_identifications(regions, references(regions), IMAGE, CONFIG))


def test_an_image_with_an_unlabeled_region_gets_none():
    regions = scene() + [region(9, None, 700, 500, 50, 50)]
    assert position_identifications(regions, references(regions), IMAGE, CONFIG) == []


def test_hallucination_questions_take_each_side_as_often_as_real_ones_and_only_with_a_basis():
    regions = scene()
    weights = {"identify to the left of": 1, "identify above": 1, "count": 3}  # the image's real questions per form
    assert identification_slots(weights) == [("identification", "identify to the left of", "to the left of"),
                                             ("identification", "identify above", "above")]
    absent = [AbsentLabel("giraffe", "cooccurrence", {"probability": 0.01}), AbsentLabel("zebra", None),
              AbsentLabel("elephant", "cooccurrence", {"probability": 0.02}),
              AbsentLabel("camel", "cooccurrence", {"probability": 0.03})]
    labels = {r.label for r in regions if r.label}
    out = hallucination_candidates("vg:3", regions, labels, absent, CONFIG, weights)
    ident = [c for c in out if c.task_type == "identification"]
    assert [(c.question, c.answer, c.detail["absence_basis"]) for c in ident] == [
        ("What is the object to the left of the giraffe?", "There is no giraffe in the image.", "cooccurrence"),
        ("What is the object above the elephant?", "There is no elephant in the image.", "cooccurrence")]
    assert all(c.is_hallucination and c.evidence == [] and c.reason is None for c in ident)
    # the unbased label and the third based one take only the other forms
    assert {c.detail["absent"] for c in out if c.task_type != "identification"} == {"giraffe", "zebra", "elephant", "camel"}
