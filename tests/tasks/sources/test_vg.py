import json
import shutil

import pyarrow.parquet as pq
import pytest

from reasonvqa.jsonstream import JsonSourceError
from reasonvqa.stage import summarize
from reasonvqa.tasks.sources.vg import ingest_vg

from tests.tasks.sources.conftest import assert_accounted, rejects_by_reason, rows, stage_bytes, write_json, write_text


def _images(*sizes, key="image_id"):
    return [{key: i, "width": w, "height": h, "url": f"https://cs.stanford.edu/people/rak248/VG_100K/{i}.jpg",
             "coco_id": None, "flickr_id": None} for i, (w, h) in enumerate(sizes, start=1)]


def _obj(object_id, name, x=10, y=10, w=20, h=20, synsets=None, **extra):
    return {"synsets": [f"{name}.n.01"] if synsets is None else synsets, "h": h, "object_id": object_id,
            "names": [name], "w": w, "y": y, "x": x, **extra}


def _end(obj):
    """A relationship endpoint as v1.2 embeds it: ``name`` instead of ``names``."""
    out = {k: v for k, v in obj.items() if k != "names"}
    out["name"] = obj["names"][0]
    return out


def _rel(rid, predicate, subject, obj, synsets=("along.r.01",)):
    return {"predicate": predicate, "object": _end(obj), "relationship_id": rid, "synsets": list(synsets), "subject": _end(subject)}


# -- the real sample ----------------------------------------------------------------------------------
def test_real_sample_values(vg_sample, tmp_path):
    stage = tmp_path / "vg"
    stats = ingest_vg(vg_sample, stage)
    assert_accounted(stats, stage)
    images = rows(stage, "images")
    assert [r["image_id"] for r in images] == ["vg:1", "vg:2", "vg:3", "vg:4", "vg:5"]
    assert images[0] == {"image_id": "vg:1", "source": "vg", "source_image_id": "1", "width": 800, "height": 600,
                         "url": "https://cs.stanford.edu/people/rak248/VG_100K_2/1.jpg", "file_path": "VG_100K_2/1.jpg",
                         "group_id": None, "is_clean": None, "visual_domain": "mixed", "license": "CC BY 4.0", "context": None}
    objects = {r["object_id"]: r for r in rows(stage, "objects")}
    assert len(objects) == 177
    clock = objects["vg:1/o1058498"]
    assert (clock["label"], clock["synset"], clock["x"], clock["y"], clock["w"], clock["h"]) == ("clock", "clock.n.01", 421, 91, 79, 339)
    assert clock["origin"] == "annotation:vg" and clock["mask"] is None and clock["score"] is None
    assert objects["vg:1/o1058536"]["synset"] is None and objects["vg:1/o1058536"]["label"] == "work truck"
    monitor = next(r for r in objects.values() if r["object_id"].endswith("/o1060246"))
    assert monitor["label"] == "monitor" and monitor["names"] == ["monitor", "computer"]
    attributes = rows(stage, "attributes")
    assert {a["attribute"] for a in attributes if a["object_id"] == "vg:1/o1058498"} == {"green", "tall"}
    assert {a["attribute"] for a in attributes if a["object_id"] == "vg:1/o1058508"} == {"tall", "brick", "made of bricks"}
    relation = next(r for r in rows(stage, "relations") if r["relation_id"] == "vg:1/r15927")
    assert relation == {"relation_id": "vg:1/r15927", "image_id": "vg:1", "subject_id": "vg:1/o5045", "object_id": "vg:1/o5046",
                        "predicate": "on", "subject_label": "shade", "object_label": "street", "synset": "along.r.01"}
    totals = summarize(stats)
    assert totals["rows_in"] == 5 + 177 + 158 + len(attributes) + totals["rejected"].get("duplicate_attribute", 0)
    assert set(totals["rejected"]) == {"duplicate_relation"}  # the same (subject, predicate, object) annotated twice
    assert stats[0]["missing_files"] == [] and stats[0]["merge"] == "aligned"


def test_shards_keep_each_image_with_its_annotations(vg_sample, tmp_path):
    stage = tmp_path / "vg"
    stats = ingest_vg(vg_sample, stage, shard_size=2)
    assert [s["tables"]["images"] for s in stats] == [2, 2, 1]
    assert_accounted(stats, stage)
    for shard in range(3):
        part = f"part-{shard:05d}.parquet"
        images = set(pq.read_table(stage / "images" / part)["image_id"].to_pylist())
        for table in ("objects", "relations", "attributes"):
            assert set(pq.read_table(stage / table / part)["image_id"].to_pylist()) <= images
    whole = tmp_path / "whole"
    ingest_vg(vg_sample, whole)
    for table in ("images", "objects", "relations", "attributes"):
        assert rows(stage, table) == rows(whole, table)


def test_max_images_reads_only_the_first_images(vg_sample, tmp_path):
    stage = tmp_path / "vg"
    stats = ingest_vg(vg_sample, stage, shard_size=1, max_images=2)
    assert len(stats) == 2 and {s["merge"] for s in stats} == {"aligned"}  # in-order files stop early
    assert {r["image_id"] for t in ("images", "objects", "relations", "attributes") for r in rows(stage, t)} == {"vg:1", "vg:2"}
    assert set(rejects_by_reason(stage)) <= {"duplicate_relation"}


# -- versions and field drift -------------------------------------------------------------------------
def test_v10_id_drift(tmp_path):
    src = tmp_path / "src"
    write_json(src, "image_data.json", _images((100, 100), key="id"))
    write_json(src, "objects.json", [{"id": 1, "objects": [{"id": 11, "x": 0, "y": 0, "w": 5, "h": 5, "names": ["Dog"], "synsets": ["dog.n.01"]},
                                                           {"id": 12, "x": 5, "y": 5, "w": 5, "h": 5, "name": "ball"}]}])
    write_json(src, "attributes.json", [{"id": 1, "attributes": [{"id": 11, "attributes": ["Brown "]}]}])
    write_json(src, "relationships.json", [{"id": 1, "relationships": [{"id": 7, "predicate": "Chasing", "synsets": [],
                                                                         "subject": {"id": 11, "name": "dog"}, "object": {"id": 12, "name": "ball"}}]}])
    stage = tmp_path / "vg"
    assert_accounted(ingest_vg(src, stage), stage)
    assert [(o["object_id"], o["label"], o["synset"]) for o in rows(stage, "objects")] == [("vg:1/o11", "dog", "dog.n.01"), ("vg:1/o12", "ball", None)]
    assert rows(stage, "attributes") == [{"object_id": "vg:1/o11", "image_id": "vg:1", "attribute": "brown"}]
    (rel,) = rows(stage, "relations")
    assert (rel["relation_id"], rel["predicate"], rel["subject_id"], rel["object_id"], rel["synset"]) == ("vg:1/r7", "chasing", "vg:1/o11", "vg:1/o12", None)


def test_v14_merged_object_ids_resolve_attributes_and_relationships(tmp_path):
    src = tmp_path / "src"
    write_json(src, "image_data.json", _images((640, 480)))
    man = _obj(300, "man", merged_object_ids=[100, 101])
    shirt = _obj(301, "shirt")
    write_json(src, "objects.json", [{"image_id": 1, "objects": [man, shirt]}])
    # attributes.json was not re-released with v1.4: it still names the older, merged ids
    write_json(src, "attributes.json", [{"image_id": 1, "attributes": [
        {**_obj(100, "man"), "attributes": ["tall"]}, {**_obj(101, "man"), "attributes": ["Tall", "smiling"]}]}])
    v14_rel = {"predicate": "wearing", "relationship_id": 9, "synsets": ["wear.v.01"],
               "subject": {**_obj(300, "man"), "merged_object_ids": [100, 101]}, "object": _obj(301, "shirt")}
    write_json(src, "relationships.json", [{"image_id": 1, "relationships": [v14_rel]}])
    stage = tmp_path / "vg"
    assert_accounted(ingest_vg(src, stage), stage)
    assert [(a["object_id"], a["attribute"]) for a in rows(stage, "attributes")] == [("vg:1/o300", "smiling"), ("vg:1/o300", "tall")]
    assert rejects_by_reason(stage) == {"duplicate_attribute": ["attributes.json#[0].attributes[1].attributes[0]"]}
    (rel,) = rows(stage, "relations")
    assert (rel["subject_id"], rel["subject_label"], rel["object_label"]) == ("vg:1/o300", "man", "shirt")


def test_scene_graphs_variant_with_embedded_attributes(tmp_path):
    src = tmp_path / "src"
    write_json(src, "image_data.json", _images((800, 600), (800, 600)))
    graphs = [
        {"image_id": 1, "objects": [_obj(1, "man", attributes=["standing"]), _obj(2, "horse")],
         "relationships": [{"relationship_id": 5, "predicate": "riding", "synsets": ["ride.v.01"], "subject_id": 1, "object_id": 2},
                           {"relationship_id": 6, "predicate": "near", "synsets": [], "subject_id": 1, "object_id": 99}]},
        {"image_id": 2, "objects": [], "relationships": []},
    ]
    write_json(src, "scene_graphs.json", graphs)
    write_json(src, "relationships.json", [{"image_id": 1, "relationships": [_rel(5, "riding", _obj(1, "man"), _obj(2, "horse"))]}])
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage)
    assert_accounted(stats, stage)
    assert stats[0]["primary_file"] == "scene_graphs.json"
    assert stats[0]["ignored_files"] == ["relationships.json"] and stats[0]["missing_files"] == ["attributes.json"]
    assert [r["image_id"] for r in rows(stage, "images")] == ["vg:1", "vg:2"]
    assert rows(stage, "attributes") == [{"object_id": "vg:1/o1", "image_id": "vg:1", "attribute": "standing"}]
    (rel,) = rows(stage, "relations")
    assert (rel["relation_id"], rel["subject_label"], rel["object_label"], rel["synset"]) == ("vg:1/r5", "man", "horse", "ride.v.01")
    assert rejects_by_reason(stage) == {"relation_endpoint_unknown": ["scene_graphs.json#[0].relationships[1]"]}


def test_optional_files_absent_are_reported_not_errors(tmp_path):
    src = tmp_path / "src"
    write_json(src, "image_data.json", _images((100, 100)))
    write_json(src, "objects.json", [{"image_id": 1, "objects": [_obj(1, "cat")]}])
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage)
    assert stats[0]["missing_files"] == ["attributes.json", "relationships.json"]
    assert len(rows(stage, "objects")) == 1 and rows(stage, "relations") == [] and rows(stage, "attributes") == []


def test_missing_required_files_name_the_path(tmp_path):
    src = tmp_path / "src"
    write_json(src, "objects.json", [])
    with pytest.raises(FileNotFoundError, match=str(src / "image_data.json")):
        ingest_vg(src, tmp_path / "vg")
    (src / "objects.json").unlink()
    write_json(src, "image_data.json", [])
    with pytest.raises(FileNotFoundError, match=str(src / "objects.json")):
        ingest_vg(src, tmp_path / "vg")


# -- bad input ----------------------------------------------------------------------------------------
def test_bad_records_of_every_kind_are_rejected_with_locations(tmp_path):
    src = tmp_path / "src"
    images = _images((100, 100), (100, 100), (50, 50))
    images[2]["width"] = 0  # image 3 has an unusable size
    images.append(dict(images[0]))  # image 1 listed twice
    write_json(src, "image_data.json", images)
    write_json(src, "objects.json", [
        {"image_id": 1, "objects": [_obj(1, "dog"), _obj(1, "dog again"), _obj(2, "ball", x=95, w=10), _obj(3, "kite", x=200),
                                    _obj(4, "cloud", w="wide"), "not an object", _obj(5, "sun", x=-1, y=-1)]},
        {"image_id": 2, "objects": "nope"},
        {"objects": [_obj(6, "tree")]},
        ["not", "a", "record"],
        {"image_id": 3, "objects": [_obj(7, "cat")]},
        {"image_id": 77, "objects": [_obj(8, "bird"), _obj(9, "bird")]},
    ])
    write_json(src, "attributes.json", [
        {"image_id": 1, "attributes": [{**_obj(1, "dog"), "attributes": ["Brown", "brown", "", 7]},
                                       {**_obj(42, "ghost"), "attributes": ["white"]}, "junk"]},
    ])
    dog, ball = _obj(1, "dog"), _obj(2, "ball", x=95, w=10)
    write_json(src, "relationships.json", [
        {"image_id": 1, "relationships": [_rel(1, "has", dog, ball), _rel(1, "near", dog, ball), _rel(2, "HAS", dog, ball),
                                          _rel(3, "on", dog, _obj(42, "ghost")),
                                          {"relationship_id": 4, "predicate": "on", "subject": "dog", "object": _end(ball)}]},
    ])
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage)
    assert_accounted(stats, stage)
    assert rejects_by_reason(stage) == {
        "attribute_empty": ["attributes.json#[0].attributes[0].attributes[2]"],
        "attribute_entry_malformed": ["attributes.json#[0].attributes[2]"],
        "attribute_malformed": ["attributes.json#[0].attributes[0].attributes[3]"],
        "attribute_object_unknown": ["attributes.json#[0].attributes[1].attributes[0]"],
        "box_not_numeric": ["objects.json#[0].objects[4]"],
        "box_outside_image": ["objects.json#[0].objects[3]"],
        "duplicate_attribute": ["attributes.json#[0].attributes[0].attributes[1]"],
        "duplicate_image_id": ["image_data.json#[3]"],
        "duplicate_object_id": ["objects.json#[0].objects[1]"],
        "duplicate_relation": ["relationships.json#[0].relationships[2]"],
        "duplicate_relation_id": ["relationships.json#[0].relationships[1]"],
        "image_bad_size": ["image_data.json#[2]"],
        "image_not_in_image_data": ["objects.json#[5].objects[0]", "objects.json#[5].objects[1]"],
        "image_rejected": ["objects.json#[4].objects[0]"],
        "object_malformed": ["objects.json#[0].objects[5]"],
        "record_malformed": ["objects.json#[1]", "objects.json#[3]"],
        "record_missing_image_id": ["objects.json#[2]"],
        "relation_endpoint_malformed": ["relationships.json#[0].relationships[4]"],
        "relation_endpoint_unknown": ["relationships.json#[0].relationships[3]"],
    }
    objects = {o["object_id"]: o for o in rows(stage, "objects")}
    assert sorted(objects) == ["vg:1/o1", "vg:1/o2", "vg:1/o5"]
    assert (objects["vg:1/o2"]["x"], objects["vg:1/o2"]["w"]) == (95, 5)  # 5 px overhang clipped
    assert (objects["vg:1/o5"]["x"], objects["vg:1/o5"]["y"], objects["vg:1/o5"]["w"]) == (0, 0, 19)
    assert stats[0]["boxes_clipped"] == 2
    assert [r["image_id"] for r in rows(stage, "images")] == ["vg:1", "vg:2"]
    assert rows(stage, "attributes") == [{"object_id": "vg:1/o1", "image_id": "vg:1", "attribute": "brown"}]
    assert [r["relation_id"] for r in rows(stage, "relations")] == ["vg:1/r1"]
    reject = next(r for r in rows(stage, "_rejects") if r["reason"] == "box_not_numeric")
    assert json.loads(reject["record"])["w"] == "wide"


def test_a_truncated_file_stops_the_read_naming_file_and_place(vg_sample, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(vg_sample, src)
    text = (vg_sample / "relationships.json").read_text()
    cut = text.index('{"relationships"', text.index('"image_id": 2')) + 40  # inside image 3's record
    (src / "relationships.json").write_text(text[:cut])
    stage = tmp_path / "vg"
    # the rest of the file is missing: no reject of one record, and no finished stage without it
    with pytest.raises(JsonSourceError, match=rf"relationships.json: truncated: the file ends inside record \[2\] "
                                              rf"\(bytes \[0:{cut}\]\)"):
        ingest_vg(src, stage, shard_size=2)
    assert not (stage / "_done" / "ALL").exists()


def test_files_in_another_order_than_image_data_give_the_same_tables(vg_sample, tmp_path):
    aligned = tmp_path / "aligned"
    ingest_vg(vg_sample, aligned, shard_size=2)
    src = tmp_path / "src"
    shutil.copytree(vg_sample, src)
    for name in ("objects.json", "relationships.json"):
        records = json.loads((vg_sample / name).read_text())
        write_json(src, name, list(reversed(records)))
    stage = tmp_path / "shuffled"
    stats = ingest_vg(src, stage, shard_size=2)
    assert_accounted(stats, stage)
    assert {s["merge"] for s in stats} == {"partitioned"} and "shard" in stats[0]["merge_reason"]
    for table in ("images", "objects", "relations", "attributes"):
        assert rows(stage, table) == rows(aligned, table)
    assert not list(tmp_path.glob("*spill*"))  # spill files (beside the stage folder) are removed


def test_records_for_unknown_images_interleaved_stay_aligned(tmp_path):
    src = tmp_path / "src"
    write_json(src, "image_data.json", _images((100, 100), (100, 100), (100, 100)))
    write_json(src, "objects.json", [{"image_id": 1, "objects": [_obj(1, "a")]}, {"image_id": 50, "objects": [_obj(2, "b")]},
                                     {"image_id": 3, "objects": [_obj(3, "c")]}])
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage, shard_size=1)
    assert [s["merge"] for s in stats] == ["aligned"] * 3
    assert [s["rejected"] for s in stats] == [{"image_not_in_image_data": 1}, {}, {}]
    assert [s["tables"]["objects"] for s in stats] == [1, 0, 1]


# -- determinism and resume ---------------------------------------------------------------------------
def test_two_runs_write_identical_bytes(vg_sample, tmp_path):
    ingest_vg(vg_sample, tmp_path / "a", shard_size=2)
    ingest_vg(vg_sample, tmp_path / "b", shard_size=2)
    first, second = stage_bytes(tmp_path / "a"), stage_bytes(tmp_path / "b")
    assert first == second and len(first) == 15


def test_finished_stage_is_not_read_again(vg_sample, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(vg_sample, src)
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage, shard_size=2)
    shutil.rmtree(src)  # a rerun must not touch the inputs
    assert ingest_vg(src, stage, shard_size=2) == stats
    (stage / "_done" / "ALL").unlink()
    with pytest.raises(FileNotFoundError):
        ingest_vg(src, stage, shard_size=2)


def test_image_data_not_an_array_is_a_reject(tmp_path):
    src = tmp_path / "src"
    write_text(src, "image_data.json", '{"images": []}')
    write_json(src, "objects.json", [{"image_id": 1, "objects": [_obj(1, "a")]}])
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage)
    assert_accounted(stats, stage)
    assert rejects_by_reason(stage) == {"image_not_in_image_data": ["objects.json#[0].objects[0]"],
                                        "json_not_array": ["image_data.json#[0]@bytes[0:0]"]}


def test_out_of_order_files_with_max_images(vg_sample, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(vg_sample, src)
    records = json.loads((vg_sample / "objects.json").read_text())
    write_json(src, "objects.json", [records[1], records[0], *records[2:]])
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage, shard_size=1, max_images=2)
    assert_accounted(stats, stage)
    assert stats[0]["merge"] == "partitioned" and stats[0]["skipped_outside_selection"] == 9  # 3 files x images 3-5
    assert {r["image_id"] for r in rows(stage, "objects")} == {"vg:1", "vg:2"}


def test_max_images_with_a_selected_image_after_one_beyond_the_selection(vg_sample, tmp_path):
    # image 3 (beyond max_images=2) listed before image 2: reading must not stop at image 3 and lose image 2
    src = tmp_path / "src"
    shutil.copytree(vg_sample, src)
    records = json.loads((vg_sample / "objects.json").read_text())
    write_json(src, "objects.json", [records[0], records[2], records[1], *records[3:]])
    stage = tmp_path / "vg"
    stats = ingest_vg(src, stage, shard_size=1, max_images=2)
    assert_accounted(stats, stage)
    whole = tmp_path / "whole"
    ingest_vg(vg_sample, whole, shard_size=1, max_images=2)
    for table in ("images", "objects", "relations", "attributes"):
        assert rows(stage, table) == rows(whole, table)
    assert {r["image_id"] for r in rows(stage, "objects")} == {"vg:1", "vg:2"}
    assert stats[0]["merge"] == "partitioned" and stats[0]["skipped_outside_selection"] == 9
