"""Which absent objects take the identification form, drawn over a shard (tasks/questions/position_draw.py)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter

from reasonvqa.tasks.questions.absence import AbsentLabel
from reasonvqa.tasks.questions.grounded import singular
from reasonvqa.tasks.questions.position_draw import draw_positions


def cooc(label: str) -> AbsentLabel:
    return AbsentLabel(label, "cooccurrence", {"probability": 0.01})


def test_one_image_takes_its_options_in_a_hash_order_of_image_and_label():
    options = [(cooc(label), label) for label in ("giraffe", "elephant", "camel")]
    # blake2b(8 bytes) of "vg:3\x1f<label>\x1fposition", by hand: elephant 2af1513b..., giraffe 2ebf9dda..., camel 877eadb1...
    key = {label: hashlib.blake2b(f"vg:3\x1f{label}\x1fposition".encode(), digest_size=8).hexdigest()
           for label in ("giraffe", "elephant", "camel")}
    assert sorted(key, key=key.get) == ["elephant", "giraffe", "camel"]
    drawn = draw_positions({"vg:3": options}, {"vg:3": 2})["vg:3"]
    assert [c.label for c in drawn] == ["giraffe", "elephant"]  # the two first by hash, in the options' order
    assert draw_positions({"vg:3": options}, {"vg:3": 0}) == {"vg:3": []}
    assert [c.label for c in draw_positions({"vg:3": options}, {"vg:3": 5})["vg:3"]] == ["giraffe", "elephant", "camel"]


def test_the_shard_spreads_the_names_most_constrained_images_first():
    # every image could name "curb"; taken first in each list, all three position questions would say "no curb"
    curb = cooc("curb")
    options = {"vg:1": [(curb, "curb"), (cooc("store"), "store")],
               "vg:2": [(curb, "curb"), (cooc("taxi"), "taxi"), (AbsentLabel("grass", "detector"), "grass")],
               "vg:3": [(curb, "curb")]}
    drawn = draw_positions(options, {"vg:1": 1, "vg:2": 2, "vg:3": 1})
    # vg:3 (one name) first: curb; vg:1 (two): store, named by no one yet; vg:2 (three): taxi and grass, named by no
    # one and offered by it alone, grass first as the stronger basis (detector), then taxi before the named curb
    assert {image: [c.label for c in found] for image, found in drawn.items()} == {
        "vg:1": ["store"], "vg:2": ["taxi", "grass"], "vg:3": ["curb"]}


def test_names_not_labels_are_spread():
    # "buildings" and "building" are both named "building" (the synset's lemma): one name, counted once named
    options = {"vg:1": [(cooc("building"), "building")],
               "vg:2": [(cooc("buildings"), "building"), (cooc("awnings"), "awning")]}
    drawn = draw_positions(options, {"vg:1": 1, "vg:2": 1})
    assert [c.label for c in drawn["vg:1"]] == ["building"] and [c.label for c in drawn["vg:2"]] == ["awnings"]


def _most_distinct(options: dict[str, set[str]], slots: Counter) -> int:
    """The most slots that can name different classes: a maximum matching of slots to names (augmenting paths)."""
    owner: dict[str, tuple[str, int]] = {}

    def augment(slot: tuple[str, int], seen: set[str]) -> bool:
        for name in sorted(options.get(slot[0], ())):
            if name not in seen:
                seen.add(name)
                if name not in owner or augment(owner[name], seen):
                    owner[name] = slot
                    return True
        return False

    return sum(augment((image, k), set()) for image, n in sorted(slots.items()) for k in range(n))


def test_the_50_vg_images_position_questions_name_as_many_classes_as_their_options_allow(vg50):
    rows = vg50[0].outputs["questions"].to_pylist()
    position = [r for r in rows if r["question"].startswith("What is the object ")]
    slots = Counter(r["image_id"] for r in position if not r["is_hallucination"])
    # each valid absent object with a basis has one question of another form: the image's options, by name
    options: dict[str, set[str]] = {}
    for r in rows:
        if r["is_hallucination"] and r["absence_basis"] == "cooccurrence" and r["task_type"] != "identification":
            name = re.fullmatch(r"There (?:is|are) no (.+) in the image\.", r["answer"]).group(1)
            options.setdefault(r["image_id"], set()).add(singular(name) if r["task_type"] == "counting" else name)
    halluc = [r for r in position if r["is_hallucination"]]
    names = Counter(r["answer"] for r in halluc)
    # 28 questions name 27 classes, as many as a maximum matching of slots to options gives; the first absent
    # objects of each image's list named 14 classes ("There is no grass in the image." 5 times)
    assert len(halluc) == 28 and len(names) == _most_distinct(options, slots) == 27
    assert all(r["absence_basis"] == "cooccurrence" for r in halluc)
