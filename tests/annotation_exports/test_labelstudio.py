import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from reasonvqa import masks
from reasonvqa.annotation_exports.decisions import DecisionStore, StoreError
from reasonvqa.annotation_exports.roundtrip import import_decisions
from tests.annotation_exports.fixtures import masks_by_region
from tests.annotation_exports.helpers import annotate, choice, prediction_results, release_and_batch, verdict, write_json

REALDATA = Path(__file__).parent / "realdata" / "labelstudio"


@pytest.fixture
def exported(tmp_path):
    release, store, result = release_and_batch(tmp_path, "labelstudio")
    tasks = json.loads((tmp_path / "batch" / "tasks.json").read_text())
    return tmp_path, store, result, {t["data"]["reasonvqa"]["item_id"]: t for t in tasks}


def test_tasks_carry_our_ids_percent_boxes_and_brush_masks(exported):
    tmp_path, store, result, tasks = exported
    assert sorted(tasks) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    q4 = tasks["q4"]
    assert q4["data"]["image"] == "/data/local-files/?d=nuscenes/cam1.jpg"
    assert q4["data"]["reasonvqa"]["regions"] == {"r0": "nuscenes:cam1/g1", "r1": "nuscenes:cam1/g2"}
    box = q4["predictions"][0]["result"][0]
    assert box["type"] == "rectanglelabels" and box["value"]["rectanglelabels"] == ["car"]
    assert box["value"]["x"] == pytest.approx(5.0) and box["value"]["height"] == pytest.approx(25.625)  # of 50x40
    answer = q4["predictions"][0]["result"][-1]
    assert answer["from_name"] == "answer" and answer["value"]["text"] == ["Berlin"]
    q1 = tasks["q1"]
    brushes = [r for r in q1["predictions"][0]["result"] if r["type"] == "brushlabels"]
    assert len(brushes) == 3
    for r in brushes:
        region_id = q1["data"]["reasonvqa"]["regions"][r["id"]]
        assert np.array_equal(masks.labelstudio_decode(r["value"]["rle"], 40, 30), masks_by_region()[region_id])
    assert tasks["q6"]["predictions"][0]["result"][0]["from_name"] == "answer"  # no regions on vg:9


def test_labeling_config_declares_every_control_the_tasks_use(exported):
    tmp_path, *_ , tasks = exported
    config = ET.fromstring((tmp_path / "batch" / "label_config.xml").read_text())
    names = {e.get("name"): e.tag for e in config.iter() if e.get("name")}
    assert names == {"image": "Image", "choices_text": "Text", "box": "RectangleLabels", "mask": "BrushLabels",
                     "region_decision": "Choices", "question_decision": "Choices", "answer": "TextArea"}
    labels = {e.get("value") for e in config.find("RectangleLabels")}
    assert labels == {"car", "pedestrian", "region"}
    used = {r["from_name"] for t in tasks.values() for r in t["predictions"][0]["result"]}
    assert used <= set(names)


def test_export_is_deterministic_and_registers_the_batch(exported, tmp_path):
    first, store, result, _ = exported
    again = release_and_batch(tmp_path / "again", "labelstudio")[2]
    assert again.batch.batch_id == result.batch.batch_id
    assert (first / "batch" / "tasks.json").read_bytes() == (tmp_path / "again" / "batch" / "tasks.json").read_bytes()
    assert DecisionStore(store).batch(result.batch.batch_id).to_json() == result.batch.to_json()


def test_import_maps_accept_reject_redraw_add_and_answers(exported):
    tmp_path, store, result, tasks = exported
    q1 = tasks["q1"]
    keys = {v: k for k, v in q1["data"]["reasonvqa"]["regions"].items()}
    results = prediction_results(q1)
    redrawn = masks_by_region()["sa1b:1/g3"].copy()
    redrawn[10:12, 30:32] = 1
    for r in results:
        if r["id"] == keys["sa1b:1/g3"]:
            r["value"]["rle"] = masks.labelstudio_encode(redrawn)
            r["id"] = "xY12ab"  # Label Studio gives redrawn regions new ids: matched by IoU
    added = np.zeros((30, 40), np.uint8)
    added[20:25, 10:20] = 1
    results.append({"id": "new1", "from_name": "mask", "to_name": "image", "type": "brushlabels", "original_width": 40,
                    "original_height": 30, "value": {"format": "rle", "rle": masks.labelstudio_encode(added), "brushlabels": ["region"]}})
    results += [choice(keys["sa1b:1/g1"], "accept"), choice(keys["sa1b:1/g2"], "reject"), verdict("correct")]
    q4 = tasks["q4"]
    q4_results = prediction_results(q4)
    q4_results[-1]["value"]["text"] = ["Kiel"]  # one of its choices
    q4_results[0]["value"]["x"] = 10.0  # moved the car box
    export = write_json(tmp_path / "ls_export.json", [annotate(q1, results, task_id=1), annotate(q4, q4_results, task_id=2)])

    report = import_decisions(export, "labelstudio", store=store)
    assert report.rejects == [] and report.seq == 1
    got = {(d["region_id"] or d["question_id"], d["action"]) for d in report.decisions}
    added_id = next(d["region_id"] for d in report.decisions if d["action"] == "add")
    assert got == {("sa1b:1/g1", "accept"), ("sa1b:1/g2", "reject"), ("sa1b:1/g3", "edit"), (added_id, "add"),
                   ("q1", "correct"), ("nuscenes:cam1/g1", "edit"), ("q4", "edit_answer")}
    edit = next(d for d in report.decisions if d["region_id"] == "sa1b:1/g3")
    assert np.array_equal(masks.coco_decode(edit["mask"]), redrawn)
    car = next(d for d in report.decisions if d["region_id"] == "nuscenes:cam1/g1")
    assert car["box"] == [5.0, 3.0, 20.0, 10.25] and car["annotator"] == "labelstudio:7"
    assert next(d for d in report.decisions if d["action"] == "edit_answer")["answer"] == "Kiel"
    assert added_id.startswith("sa1b:1/gh")
    assert DecisionStore(store).decided_items() == {"q1", "q4"}

    again = import_decisions(export, "labelstudio", store=store)  # the same file twice: nothing new
    assert again.decisions == [] and len(again.duplicates) == 7 and len(DecisionStore(store).import_files()) == 1


def test_real_export_from_another_labeling_config_is_rejected_and_the_store_unchanged(exported):
    tmp_path, store, result, tasks = exported
    report = import_decisions(REALDATA / "export_rectangle_polygon_keypoint.json", "labelstudio", store=store)
    assert report.decisions == []
    assert [r["reason"] for r in report.rejects] == ["labeling_config_mismatch"]
    assert report.rejects[0]["source"] == "export_rectangle_polygon_keypoint.json#175210175"  # the task id
    assert DecisionStore(store).decisions() == []


def test_bad_records_are_rejected_with_reasons_and_good_ones_kept(exported):
    tmp_path, store, result, tasks = exported
    q1, q2, q3 = tasks["q1"], tasks["q2"], tasks["q3"]
    wrong_size = prediction_results(q1)[:1]
    wrong_size[0]["original_width"] = 80
    broken = prediction_results(q1)[:1]
    broken[0]["value"]["rle"] = broken[0]["value"]["rle"][:8]
    foreign = [{"id": "a", "from_name": "label", "to_name": "image", "type": "brushlabels", "value": {}}]
    unknown_task = json.loads(json.dumps(q2))
    unknown_task["data"]["reasonvqa"]["item_id"] = "q999"
    unknown_batch = json.loads(json.dumps(q2))
    unknown_batch["data"]["reasonvqa"]["batch_id"] = "../../etc"
    twice = annotate(q3, [verdict("correct"), choice("r0", "reject")], task_id=6)
    twice["annotations"].append({**twice["annotations"][0], "id": 61, "result": [verdict("wrong")]})  # same user, same time
    export = write_json(tmp_path / "bad.json", [
        annotate(q1, wrong_size + [choice("r9", "accept")], task_id=1),
        annotate(q1, broken, task_id=2),
        annotate(q2, foreign, task_id=3),
        annotate(unknown_task, [verdict("wrong")], task_id=4),
        annotate(unknown_batch, [verdict("wrong")], task_id=5),
        twice,
        annotate(q3, [verdict("correct"), verdict("wrong")], task_id=7),
    ])
    report = import_decisions(export, "labelstudio", store=store)
    reasons = sorted((r["reason"], r["source"].split(".result")[0]) for r in report.rejects)
    assert reasons == sorted([
        ("size_mismatch", "bad.json#1.annotations[0]"),
        ("unknown_region_id", "bad.json#1.annotations[0]"),
        ("malformed_rle", "bad.json#2.annotations[0]"),
        ("labeling_config_mismatch", "bad.json#3.annotations[0]"),
        ("unknown_item", "bad.json#4"),
        ("unknown_batch", "bad.json#5"),
        ("conflicting_decisions", "bad.json#6.annotations[0]"),
        ("conflicting_decisions", "bad.json#6.annotations[1]"),
        ("conflicting_decisions", "bad.json#7.annotations[0]"),
    ])
    assert [(d["region_id"], d["action"]) for d in report.decisions] == [("sa1b:2/g1", "reject")]


def test_an_unreadable_file_leaves_the_store_as_it_was(exported):
    tmp_path, store, result, tasks = exported
    good = write_json(tmp_path / "good.json", [annotate(tasks["q6"], [verdict("wrong")])])
    import_decisions(good, "labelstudio", store=store)
    before = {p.name: p.read_bytes() for p in (store / "imports").iterdir()}
    (tmp_path / "broken.json").write_text('[{"data": ', encoding="utf-8")
    with pytest.raises(StoreError, match="not JSON"):
        import_decisions(tmp_path / "broken.json", "labelstudio", store=store)
    assert {p.name: p.read_bytes() for p in (store / "imports").iterdir()} == before


def test_latest_decision_wins_across_imports(exported):
    tmp_path, store, result, tasks = exported
    late = write_json(tmp_path / "late.json", [annotate(tasks["q6"], [verdict("wrong")], when="2026-01-06T00:00:00Z")])
    early = write_json(tmp_path / "early.json", [annotate(tasks["q6"], [verdict("correct")], user=8, when="2026-01-05T00:00:00Z")])
    import_decisions(late, "labelstudio", store=store)
    import_decisions(early, "labelstudio", store=store)  # imported later, decided earlier: loses
    from reasonvqa.annotation_exports.decisions import effective_decisions

    winners = effective_decisions(DecisionStore(store).decisions())
    assert winners["question:q6"]["action"] == "wrong"


def test_one_region_accepted_in_two_questions_of_its_image_is_one_decision(exported):
    tmp_path, store, result, tasks = exported
    q1, q2 = tasks["q1"], tasks["q2"]  # both on sa1b:1, showing the same three regions
    export = write_json(tmp_path / "both.json", [annotate(q1, [choice("r0", "accept")], task_id=1),
                                                 annotate(q2, [choice("r0", "accept")], task_id=2)])
    report = import_decisions(export, "labelstudio", store=store)
    assert [(d["region_id"], d["action"]) for d in report.decisions] == [("sa1b:1/g1", "accept")]
    assert len(report.duplicates) == 1 and report.rejects == []
