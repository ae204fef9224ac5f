import json

import numpy as np
import pyarrow as pa
import pytest

from reasonvqa import masks, schemas
from reasonvqa.annotation_exports.apply import apply_decisions
from reasonvqa.annotation_exports.decisions import DecisionStore
from reasonvqa.annotation_exports.roundtrip import import_decisions
from reasonvqa.flows.resplit import resplit
from reasonvqa.tasks.release.reader import read_release, record_tables
from reasonvqa.tasks.release.verify import verify_release
from tests.annotation_exports.helpers import annotate, choice, prediction_results, release_and_batch, verdict, write_json


@pytest.fixture
def decided(tmp_path):
    """The fixture release, its store, and one Label Studio import touching every kind of decision."""
    release, store, result = release_and_batch(tmp_path, "labelstudio")
    tasks = {t["data"]["reasonvqa"]["item_id"]: t for t in json.loads((tmp_path / "batch" / "tasks.json").read_text())}
    q1 = tasks["q1"]
    keys = {v: k for k, v in q1["data"]["reasonvqa"]["regions"].items()}
    results = prediction_results(q1)
    redrawn = np.zeros((30, 40), np.uint8)
    redrawn[0:3, 0:3] = 1  # the one-pixel mask grown to a 3x3 corner block
    for r in results:
        if r["id"] == keys["sa1b:1/g2"]:
            r["value"]["rle"] = masks.labelstudio_encode(redrawn)
    added = np.zeros((30, 40), np.uint8)
    added[29, 39] = 1
    results.append({"id": "n1", "from_name": "mask", "to_name": "image", "type": "brushlabels", "original_width": 40,
                    "original_height": 30, "value": {"format": "rle", "rle": masks.labelstudio_encode(added), "brushlabels": ["region"]}})
    results += [choice(keys["sa1b:1/g1"], "reject"), choice(keys["sa1b:1/g3"], "accept")]
    q3 = prediction_results(tasks["q3"])
    q3[-1]["value"]["text"] = ["Rome"]  # a distractor: the old answer stays as one
    q4 = prediction_results(tasks["q4"])
    q4[-1]["value"]["text"] = ["Bonn"]  # a distractor too
    export = write_json(tmp_path / "ls.json", [annotate(q1, results, task_id=1), annotate(tasks["q3"], q3, task_id=2),
                                               annotate(tasks["q4"], q4, task_id=3),
                                               annotate(tasks["q6"], [verdict("wrong")], task_id=4)])
    report = import_decisions(export, "labelstudio", store=store)
    assert report.rejects == [] and len(report.decisions) == 7
    return release, store, report, redrawn, added


def test_the_next_release_reflects_every_decision_and_verifies(decided, tmp_path):
    release, store, report, redrawn, added = decided
    path = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    assert verify_release(path) == []
    nxt = read_release(path)
    pool = {q["question_id"]: q for q in nxt.pool.to_pylist()}
    assert sorted(pool) == ["q1", "q2", "q3", "q4", "q5"]  # q6 judged wrong
    assert pool["q3"]["answer"] == "Rome" and pool["q3"]["choices"] == ["Madrid", "Rome", "Bern", "Oslo"]
    assert pool["q4"]["answer"] == "Bonn" and pool["q4"]["choices"] == ["Berlin", "Bonn", "Kiel", "Ulm"]
    regions = {r["region_id"]: r for r in record_tables(path, nxt.manifest)["regions"].to_pylist()}
    assert "sa1b:1/g1" not in regions  # rejected
    assert np.array_equal(masks.coco_decode(regions["sa1b:1/g2"]["mask"]), redrawn)
    assert (regions["sa1b:1/g2"]["x"], regions["sa1b:1/g2"]["w"], regions["sa1b:1/g2"]["area"]) == (0.0, 3.0, 9.0)
    assert regions["sa1b:1/g2"]["origin"] == "annotation:sa1b"  # edited, still the source's region
    new = [r for r in regions.values() if r["origin"] == "annotation:human"]
    assert len(new) == 1 and np.array_equal(masks.coco_decode(new[0]["mask"]), added)
    assert regions["sa1b:1/g3"]["mask"] is not None  # accepted, unchanged
    entry = nxt.manifest["annotations"]
    assert entry["decisions"] == sorted(d["decision_id"] for d in report.decisions)
    assert entry["actions"] == {"accept": 1, "add": 1, "edit": 1, "edit_answer": 2, "reject": 1, "wrong": 1}
    assert entry["store"] == DecisionStore(store).fingerprint()
    listed = json.loads((path / "stats" / "annotation_decisions.json").read_text())
    assert sorted(d["decision_id"] for d in listed["used"]) == entry["decisions"]


def test_applying_is_deterministic_and_a_new_store_state_gives_a_new_version(decided, tmp_path):
    release, store, *_ = decided
    a = resplit(release, tmp_path / "a", domain_match="any", decisions=store)
    b = resplit(release, tmp_path / "b", domain_match="any", decisions=store)
    plain = resplit(release, tmp_path / "c", domain_match="any")
    assert a.name == b.name != plain.name
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()
    assert "annotations" not in read_release(plain).manifest


def test_tampered_decision_list_fails_verify(decided, tmp_path):
    release, store, *_ = decided
    path = resplit(release, tmp_path / "n", domain_match="any", decisions=store)
    listed = path / "stats" / "annotation_decisions.json"
    data = json.loads(listed.read_text())
    data["used"] = data["used"][1:]
    listed.write_text(json.dumps(data))
    assert any("annotation_decisions.json" in p for p in verify_release(path))


def test_decisions_for_absent_targets_are_counted_unmatched(decided):
    release, store, *_ = decided
    questions = schemas.from_rows([], schemas.QUESTIONS)
    applied = apply_decisions(DecisionStore(store), questions, {"regions": schemas.empty(schemas.REGIONS)})
    # only the added region lands (it needs no existing row); the other six find nothing to change
    assert [d["action"] for d in applied.used] == ["add"] and len(applied.unmatched) == 6
    assert applied.tables["regions"].num_rows == 1 and isinstance(applied.tables["regions"], pa.Table)


def test_a_stored_correction_outside_the_choices_is_set_aside_and_the_release_verifies(decided, tmp_path):
    """A store filled before import checked choices may hold a corrected answer that is none of them: applying
    it would break the answer-among-choices rule, so the question is set aside with its reason instead."""
    release, store, *_ = decided
    imports = sorted((store / "imports").glob("*.json"))
    data = json.loads(imports[-1].read_text())
    edit = next(d for d in data["decisions"] if d.get("question_id") == "q4" and d["action"] == "edit_answer")
    edit["answer"] = "Hamburg"  # not one of ["Berlin", "Bonn", "Kiel", "Ulm"]
    imports[-1].write_text(json.dumps(data))
    path = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    assert verify_release(path) == []
    pool = {q["question_id"]: q for q in read_release(path).pool.to_pylist()}
    assert "q4" not in pool and pool["q3"]["answer"] == "Rome"
    applied = apply_decisions(DecisionStore(store), read_release(release).pool)
    assert [(a["question_id"], a["reason"], a["answer"]) for a in applied.set_aside] == [
        ("q4", "answer edited outside the choices", "Hamburg")]
