import pytest

from reasonvqa.tasks.sources.normalize import as_int_id, normalize_label
from reasonvqa.tasks.sources.vg_records import (
    ImageEntry,
    clip_box,
    parse_image_entry,
    parse_object,
    parse_relation,
    record_image_id,
)

IMAGE = ImageEntry(image_id=1, width=800, height=600, url=None)


def test_normalize_label_and_int_ids():
    assert normalize_label("  Tree   Trunk\t") == "tree trunk"
    assert normalize_label("   ") is None and normalize_label(5) is None
    assert [as_int_id(v) for v in (7, "12", 3.0, 3.5, -1, True, "1a", None)] == [7, 12, 3, None, None, None, None, None]


def test_image_id_drift_image_id_or_id():
    assert record_image_id({"image_id": 5, "objects": []}) == 5
    assert record_image_id({"id": 6, "objects": []}) == 6
    assert record_image_id({"objects": []}) is None


def test_image_entry_v12_and_bad_sizes():
    real = {"width": 800, "url": "https://cs.stanford.edu/people/rak248/VG_100K_2/1.jpg", "height": 600,
            "image_id": 1, "coco_id": None, "flickr_id": None}
    assert parse_image_entry(real) == ImageEntry(1, 800, 600, real["url"])
    assert parse_image_entry({"id": 2, "width": 10, "height": 20}) == ImageEntry(2, 10, 20, None)
    assert parse_image_entry({"image_id": 3, "width": 0, "height": 20}) == "image_bad_size"
    assert parse_image_entry({"image_id": 3, "width": "800", "height": 20}) == "image_bad_size"
    assert parse_image_entry({"width": 8, "height": 8}) == "image_missing_id"
    assert parse_image_entry([1, 2]) == "image_record_malformed"


def test_object_v12_shape():
    obj = {"synsets": ["clock.n.01"], "h": 339, "object_id": 1058498, "names": ["clock"], "w": 79, "y": 91, "x": 421}
    parsed = parse_object(obj, IMAGE)
    assert (parsed.object_id, parsed.names, parsed.synsets) == (1058498, ["clock"], ["clock.n.01"])
    assert parsed.box == (421.0, 91.0, 79.0, 339.0) and not parsed.clipped


def test_object_v10_and_v14_shapes():
    v10 = {"id": 5, "x": 1, "y": 2, "width": 3, "height": 4, "name": "Tree  Trunk", "synsets": [{"synset_name": "trunk.n.01"}]}
    parsed = parse_object(v10, IMAGE)
    assert (parsed.object_id, parsed.names, parsed.synsets, parsed.box) == (5, ["tree trunk"], ["trunk.n.01"], (1.0, 2.0, 3.0, 4.0))
    v14 = {"synsets": [], "h": 10, "object_id": 9, "merged_object_ids": [7, 8], "names": ["Man", "man", "guy"], "w": 10, "y": 0, "x": 0}
    parsed = parse_object(v14, IMAGE)
    assert parsed.names == ["man", "guy"] and parsed.synsets == [] and parsed.merged_ids == [7, 8]


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"object_id": None}, "object_missing_id"),
        ({"names": ["  "]}, "object_missing_name"),
        ({"x": None}, "box_missing"),
        ({"w": "79"}, "box_not_numeric"),
        ({"h": float("nan")}, "box_not_numeric"),
        ({"w": 0}, "box_nonpositive_size"),
        ({"h": -5}, "box_nonpositive_size"),
        ({"x": 900}, "box_outside_image"),
        ({"x": -70}, "box_mostly_outside"),
    ],
)
def test_object_rejects(change, reason):
    obj = {"synsets": ["clock.n.01"], "h": 100, "object_id": 1, "names": ["clock"], "w": 100, "y": 10, "x": 10}
    obj.update(change)
    if change.get("x") is None and "x" in change:
        del obj["x"]
    assert parse_object(obj, IMAGE) == reason
    assert parse_object("clock", IMAGE) == "object_malformed"


def test_box_policy_clips_slight_overhang_keeps_area_fraction():
    # 10 px over the right edge of an 800 px image: clipped, kept
    assert clip_box(700, 10, 110, 50, 800, 600) == ((700.0, 10.0, 100.0, 50.0), True)
    # negative origin: clipped to 0
    assert clip_box(-4, -2, 50, 50, 800, 600) == ((0.0, 0.0, 46.0, 48.0), True)
    # exactly half inside is still kept, less than half is not
    assert clip_box(-50, 0, 100, 10, 800, 600) == ((0.0, 0.0, 50.0, 10.0), True)
    assert clip_box(-51, 0, 100, 10, 800, 600) == "box_mostly_outside"
    # touching the border from outside has no area inside
    assert clip_box(800, 0, 10, 10, 800, 600) == "box_outside_image"


def test_relationship_shapes():
    embedded = {"predicate": "ON ", "object": {"name": "street", "object_id": 5046, "x": 0, "y": 0, "w": 1, "h": 1},
                "relationship_id": 15927, "synsets": ["along.r.01"],
                "subject": {"name": "Shade", "object_id": 5045, "x": 0, "y": 0, "w": 1, "h": 1}}
    parsed = parse_relation(embedded)
    assert (parsed.relationship_id, parsed.predicate, parsed.synset) == (15927, "on", "along.r.01")
    assert (parsed.subject_id, parsed.subject_name, parsed.object_id, parsed.object_name) == (5045, "shade", 5046, "street")
    scene_graph = {"relationship_id": 3, "predicate": "wears", "synsets": [], "subject_id": 1, "object_id": 2}
    parsed = parse_relation(scene_graph)
    assert (parsed.subject_id, parsed.object_id, parsed.subject_name, parsed.synset) == (1, 2, None, None)
    v10 = {"id": 4, "predicate": "has", "subject": {"id": 1, "names": ["car"]}, "object": {"id": 2, "name": "wheel"}}
    assert parse_relation(v10).relationship_id == 4 and parse_relation(v10).object_name == "wheel"


@pytest.mark.parametrize(
    "record, reason",
    [
        ("rel", "relation_malformed"),
        ({"predicate": "on", "subject_id": 1, "object_id": 2}, "relation_missing_id"),
        ({"relationship_id": 1, "predicate": " ", "subject_id": 1, "object_id": 2}, "relation_missing_predicate"),
        ({"relationship_id": 1, "predicate": "on", "subject": "man", "object_id": 2}, "relation_endpoint_malformed"),
        ({"relationship_id": 1, "predicate": "on", "subject": {"name": "man"}, "object": {"object_id": 2}}, "relation_endpoint_malformed"),
        ({"relationship_id": 1, "predicate": "on", "subject_id": 1}, "relation_endpoint_malformed"),
    ],
)
def test_relationship_rejects(record, reason):
    assert parse_relation(record) == reason
