"""COCO's 80 categories as the absence basis of Visual Genome images that are COCO images: the bundled table, the
classes an image's COCO annotations and its own VG synsets leave claimable, and the claims (literal tables)."""

from __future__ import annotations

import json

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.tasks.questions.absence import absent_labels
from reasonvqa.tasks.questions.coco_taxonomy import categories, image_taxonomies
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.grounded_shard import generate_grounded
from reasonvqa.tasks.questions.object_classes import OBJECT_LEXNAMES, lexname, word_class
from reasonvqa.tasks.questions.regions import image_labels, shard_regions
from reasonvqa.tasks.sources.coco_instances import COCO_TAXONOMY

from tests.tasks.questions.test_grounded import ATTRIBUTES, CORPUS_EXTRA, IMAGES, OBJECTS, SOURCE_REGIONS


def coco(rows: list[tuple[str, int, list[int]]]) -> pa.Table:
    return pa.table({"image_id": [r[0] for r in rows], "coco_id": [r[1] for r in rows],
                     "category_ids": [r[2] for r in rows]}, schema=COCO_TAXONOMY)


def test_the_bundled_table_has_the_80_categories_as_coco_spells_them_with_object_synsets():
    cats = categories()
    assert len(cats) == 80 and len({c.id for c in cats}) == 80 and cats[0].id == 1 and cats[-1].id == 90
    by_name = {c.name: c for c in cats}
    assert {n: (by_name[n].label, by_name[n].synset) for n in
            ("dining table", "potted plant", "cell phone", "sports ball", "hair drier", "tv", "skis")} == {
        "dining table": ("dining table", "dining_table.n.01"), "potted plant": ("pot plant", "pot_plant.n.01"),
        "cell phone": ("cellphone", "cellular_telephone.n.01"), "sports ball": ("ball", "ball.n.01"),
        "hair drier": ("hair dryer", "hand_blower.n.01"), "tv": ("television set", "television_receiver.n.01"),
        "skis": ("ski", "ski.n.01")}
    for c in cats:  # every synset is a WordNet 3.0 synset, blocked by itself; physical objects but for two signals
        assert c.synset in c.blocking and lexname(c.synset) in (
            {"noun.communication"} if c.name in ("traffic light", "stop sign") else OBJECT_LEXNAMES), c
    # a question names an absent label by its most frequent sense (hallucination.py): for 71 categories that is the
    # category's synset; for banana, cake, toilet, hot dog and toaster another object sense of the same word; four
    # labels' first senses are no physical object (or unknown): refused there
    named = {c.name for c in cats if (found := word_class(c.label))[0] in c.blocking and found[1] in OBJECT_LEXNAMES}
    assert {c.name for c in cats} - named == {"traffic light", "stop sign", "kite", "hot dog", "toaster", "book",
                                              "banana", "cake", "toilet"}
    assert {c.name for c in cats if word_class(c.label)[1] not in OBJECT_LEXNAMES} == {
        "traffic light", "stop sign", "kite", "book"}
    # every name of one synset blocks: Visual Genome may write bag.n.04 or handbag.n.01 for a handbag
    assert {"bag.n.04", "handbag.n.01", "purse.n.01"} <= by_name["handbag"].blocking
    assert {"table.n.02", "plant.n.02", "telephone.n.01", "man.n.01"} <= (
        by_name["dining table"].blocking | by_name["potted plant"].blocking | by_name["cell phone"].blocking
        | by_name["person"].blocking)


def vg_object(image: str, native: int, label: str, synset: str) -> dict:
    return dict(object_id=f"{image}/o{native}", image_id=image, label=label, names=[label], x=1, y=1, w=5, h=5,
                origin="annotation:vg", synset=synset, synsets=[synset])


def test_a_class_coco_or_the_image_itself_annotates_is_never_claimable():
    # COCO annotated bowl (51) and broccoli (56) on coco image 9; Visual Genome also has a cup COCO missed and a
    # "table" (table.n.02: maybe the dining table); vg:3 is a COCO image with nothing annotated
    objects = schemas.from_rows([vg_object("vg:2", 1, "cup", "cup.n.01"), vg_object("vg:2", 2, "table", "table.n.02"),
                                 vg_object("vg:2", 3, "bowl", "bowl.n.01")], schemas.OBJECTS)
    found = image_taxonomies(coco([("vg:2", 9, [51, 56]), ("vg:3", 25, [])]), objects)
    assert set(found) == {"vg:2", "vg:3"}
    assert len(found["vg:2"].labels) == 76 and len(found["vg:3"].labels) == 80
    assert set(found["vg:3"].labels) - set(found["vg:2"].labels) == {"bowl", "broccoli", "cup", "dining table"}
    assert found["vg:2"].evidence == {"taxonomy": "coco", "coco_id": 9, "classes": 80}
    assert image_taxonomies(None, objects) == {} and image_taxonomies(coco([]), objects) == {}


def test_coco_images_claim_coco_classes_and_the_others_keep_todays_bases():
    labels = pa.table({"image_id": ["vg:2", "vg:2", "vg:3", "vg:3", "vg:3", "vg:4", "vg:4"],
                       "label": ["bowl", "table", "bowl", "person", "grass", "bowl", "table"]})
    taxonomy = image_taxonomies(coco([("vg:2", 9, [51])]), None)
    found = absent_labels(labels, ["vg:2", "vg:4"], 1, {}, 0.05, image_taxonomies=taxonomy)
    # vg:3 shares "bowl" with vg:2 and holds a person (k = 1): first; then the k = 0 classes by name, 3 in all
    assert [(c.label, c.basis) for c in found["vg:2"]] == [("person", "taxonomy"), ("airplane", "taxonomy"),
                                                            ("apple", "taxonomy")]
    assert found["vg:2"][0].evidence == {"taxonomy": "coco", "coco_id": 9, "classes": 80}
    assert {c.basis for c in found["vg:4"]} <= {None, "cooccurrence"}  # no coco_id: not exhaustive
    assert absent_labels(labels, ["vg:2", "vg:4"], 1, {}, 0.05) == absent_labels(labels, ["vg:2", "vg:4"], 1, {}, 0.05,
                                                                                   image_taxonomies={})


def test_every_absent_object_question_of_a_coco_image_has_the_coco_basis():
    regions = shard_regions(OBJECTS, ATTRIBUTES, SOURCE_REGIONS)
    labels = pa.concat_tables([image_labels(OBJECTS, regions), CORPUS_EXTRA])
    # COCO annotated the cars (3) and a traffic light (10) of vg:7
    result = generate_grounded(IMAGES, OBJECTS, ATTRIBUTES, regions, labels, GroundedConfig(), 0,
                               coco=coco([("vg:7", 42, [3, 10])]))
    rows = [q for q in result.outputs["questions"].to_pylist()
            if q["image_id"] == "vg:7" and q["template_ids"] == ["hallucination:absent_object"]]
    coco_labels = {c.label for c in categories()} - {"car", "traffic light"}
    assert rows and {q["absence_basis"] for q in rows} == {"taxonomy"}
    assert {q["absence_evidence"] for q in rows} == {json.dumps({"classes": 80, "coco_id": 42, "taxonomy": "coco"},
                                                                separators=(",", ":"))}
    absent = {q["answer"].removeprefix("There is no ").removeprefix("There are no ").removesuffix(" in the image.")
              for q in rows}
    assert absent <= coco_labels | {label + "s" for label in coco_labels} | {"people"} and "dog" in absent
