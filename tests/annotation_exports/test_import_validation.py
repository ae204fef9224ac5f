"""Review decisions are validated at import, record by record: impossible geometry, wrong-typed answers,
annotators and times, and malformed export structure are rejected at ``file#task-id`` while the file's
good records are kept (``strict``: none); a counting correction reaches the next release only with its
evidence, and no re-split publishes a release that fails verify."""

import json

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from reasonvqa import masks, schemas
from reasonvqa.annotation_exports.decisions import DecisionStore, StoreError
from reasonvqa.annotation_exports.roundtrip import export_batch, import_decisions
from reasonvqa.flows.cli import app
from reasonvqa.flows.resplit import resplit
from reasonvqa.tasks.release.reader import read_release
from reasonvqa.tasks.release.verify import verify_release
from reasonvqa.tasks.release.writer import UnverifiedReleaseError, write_release
from tests.annotation_exports.fixtures import image_rows, question, question_rows, region_rows
from tests.annotation_exports.helpers import annotate, choice, prediction_results, verdict, write_json


def counting_question(qid: str, answer: str, evidence: list[str]) -> dict:
    """A grounded counting question about nuscenes:cam1 (50x40) whose answer is its evidence count."""
    return {**question(qid, "nuscenes:cam1", answer, None, kind="grounded"), "task_type": "counting",
            "question": "How many cars are there in the image?", "answer_category": "number",
            "evidence_region_ids": evidence, "is_hallucination": False, "choices": None}


def write_counting_release(root, rows=None, name="cnt", version="1.0.0", verify_first=False):
    questions = schemas.from_rows(rows or question_rows() + [counting_question("q7", "1", ["nuscenes:cam1/g1"])],
                                  schemas.QUESTIONS)
    images = {"train": ["sa1b:1", "nuscenes:cam1"], "test": ["sa1b:2", "vg:9"]}
    splits = {s: questions.filter(pa.compute.is_in(questions["image_id"], pa.array(i))) for s, i in images.items()}
    return write_release(root, name, version, splits, pool=questions, stats_dir=None,
                         config={"release": {"name": name, "version": version}, "seed": 0}, inputs={},
                         tables={"regions": schemas.from_rows(region_rows(), schemas.REGIONS),
                                 "images": schemas.from_rows(image_rows(), schemas.IMAGES)},
                         verify_first=verify_first)


@pytest.fixture
def counting(tmp_path):
    """(tmp_path, release, store, tasks by item id) of a batch holding a counting question q7."""
    release = write_counting_release(tmp_path / "out")
    store = tmp_path / "store"
    export_batch(release, tmp_path / "batch", "labelstudio", 100, store=store)
    tasks = json.loads((tmp_path / "batch" / "tasks.json").read_text())
    return tmp_path, release, store, {t["data"]["reasonvqa"]["item_id"]: t for t in tasks}


def rectangle(rid: str, x: float, y: float, w: float, h: float, width: int = 50, height: int = 40) -> dict:
    return {"id": rid, "from_name": "box", "to_name": "image", "type": "rectanglelabels", "original_width": width,
            "original_height": height, "value": {"x": x, "y": y, "width": w, "height": h, "rotation": 0,
                                                 "rectanglelabels": ["car"]}}


def answer(text) -> dict:
    return {"id": "answer", "from_name": "answer", "to_name": "image", "type": "textarea", "value": {"text": text}}


def reasons(report) -> list[tuple[str, str]]:
    return sorted((r["source"].split(".result")[0], r["reason"]) for r in report.rejects)


def test_impossible_boxes_are_rejected_at_file_task_id_and_good_records_kept(counting):
    tmp_path, release, store, tasks = counting
    q4 = tasks["q4"]
    export = write_json(tmp_path / "boxes.json", [
        annotate(q4, [rectangle("n1", float("nan"), 10, 20, 20)], task_id=11),
        annotate(q4, [rectangle("n2", -1e308, 10, 1e308, 20)], task_id=12),
        annotate(q4, [rectangle("n3", float("inf"), 10, 20, 20)], task_id=13),
        annotate(q4, [rectangle("n4", 90, 10, 20, 20)], task_id=14),  # right edge at 110 %
        annotate(q4, [rectangle("n5", 10, 10, -5, 20)], task_id=15),
        annotate(q4, [rectangle("n6", 10, 10, 20, 20, width=80)], task_id=16),
        annotate(q4, [rectangle("n7", 60, 50, 20, 20)], task_id=17),  # a good drawn box
    ])
    report = import_decisions(export, "labelstudio", store=store)
    assert reasons(report) == [("boxes.json#11.annotations[0]", "malformed_geometry"),
                               ("boxes.json#12.annotations[0]", "malformed_geometry"),
                               ("boxes.json#13.annotations[0]", "malformed_geometry"),
                               ("boxes.json#14.annotations[0]", "outside_image"),
                               ("boxes.json#15.annotations[0]", "malformed_geometry"),
                               ("boxes.json#16.annotations[0]", "size_mismatch")]
    assert [(d["action"], d["box"]) for d in report.decisions] == [("add", [30.0, 20.0, 10.0, 8.0])]
    stored = DecisionStore(store).decisions()
    assert [d["box"] for d in stored] == [[30.0, 20.0, 10.0, 8.0]]


def brush(rid: str, mask: np.ndarray, width: int = 50, height: int = 40) -> dict:
    return {"id": rid, "from_name": "mask", "to_name": "image", "type": "brushlabels", "original_width": width,
            "original_height": height, "value": {"format": "rle", "rle": masks.labelstudio_encode(mask),
                                                 "brushlabels": ["car"]}}


def test_a_mask_that_does_not_decode_to_the_images_size_is_rejected(counting):
    tmp_path, release, store, tasks = counting
    q4 = tasks["q4"]
    good = np.zeros((40, 50), dtype=np.uint8)
    good[5:15, 10:30] = 1
    small = np.zeros((30, 40), dtype=np.uint8)  # drawn on a 40x30 image, labelled as the 50x40 one
    small[5:15, 10:30] = 1
    export = write_json(tmp_path / "brush.json", [annotate(q4, [brush("m1", small)], task_id=21),
                                                   annotate(q4, [brush("m2", good)], task_id=22)])
    report = import_decisions(export, "labelstudio", store=store)
    assert [(r["source"].split(".result")[0], r["reason"], r["detail"]) for r in report.rejects] == [
        ("brush.json#21.annotations[0]", "malformed_rle",
         "brush RLE holds 4800 values, an RGBA image of 50x40 has 8000")]
    [added] = report.decisions
    assert added["action"] == "add" and added["mask"]["size"] == [40, 50] and added["box"] == [10.0, 5.0, 20.0, 10.0]
    assert np.array_equal(masks.coco_decode(DecisionStore(store).decisions()[0]["mask"]), good)


def test_wrong_typed_answers_annotators_times_and_null_values_are_rejected(counting):
    tmp_path, release, store, tasks = counting
    q7, q4 = tasks["q7"], tasks["q4"]
    cast = annotate(q4, [answer(["Bonn"])], task_id=5)
    cast["annotations"][0]["completed_by"] = ["x"]
    epoch = annotate(q4, [answer(["Bonn"])], task_id=6)
    epoch["annotations"][0]["created_at"] = epoch["annotations"][0]["updated_at"] = 12345
    nulled = annotate(q4, [{**verdict("wrong"), "value": None}], task_id=7)
    export = write_json(tmp_path / "typed.json", [
        annotate(q7, [answer(["two"])], task_id=1),
        annotate(q7, [answer(["-1"])], task_id=2),
        annotate(q7, [answer(["1.5"])], task_id=3),
        annotate(q4, [answer("Bonn")], task_id=4),  # a string, not a list: the whole answer
        cast, epoch, nulled,
        annotate(q4, [verdict("maybe")], task_id=8),
        annotate(q7, [answer(["02"])], user=9, task_id=9),  # a count: stored as 2
    ])
    report = import_decisions(export, "labelstudio", store=store)
    assert reasons(report) == [("typed.json#1.annotations[0]", "wrong_answer_type"),
                               ("typed.json#2.annotations[0]", "wrong_answer_type"),
                               ("typed.json#3.annotations[0]", "wrong_answer_type"),
                               ("typed.json#5.annotations[0]", "bad_annotator"),
                               ("typed.json#6.annotations[0]", "bad_time"),
                               ("typed.json#7.annotations[0]", "malformed_record"),
                               ("typed.json#8.annotations[0]", "unknown_choice")]
    assert sorted((d["item_id"], d["answer"], d["annotator"]) for d in report.decisions) == [
        ("q4", "Bonn", "labelstudio:7"), ("q7", "2", "labelstudio:9")]


# A Label Studio 1.x JSON export (Export -> JSON) of two tasks of batch b-choices, each corrected in the
# answer text area: q4's "Hamburg" is not one of Berlin | Bonn | Kiel | Ulm, q3's "Rome" is one of its choices.
CHOICES_EXPORT = r"""[
  {
    "id": 41,
    "annotations": [
      {
        "id": 77, "completed_by": 3,
        "result": [
          {"id": "answer", "type": "textarea", "value": {"text": ["Hamburg"]}, "origin": "prediction-changed",
           "to_name": "image", "from_name": "answer"}
        ],
        "was_cancelled": false, "ground_truth": false,
        "created_at": "2026-12-02T09:14:03.918201Z", "updated_at": "2026-12-02T09:14:03.918223Z",
        "draft_created_at": null, "lead_time": 12.84, "prediction": {}, "result_count": 0,
        "unique_id": "5c1e0a3e-6f57-4b0e-9c57-0f3c0c8f2d11", "import_id": null, "last_action": null,
        "task": 41, "project": 2, "updated_by": 3, "parent_prediction": 40, "parent_annotation": null,
        "last_created_by": null
      }
    ],
    "file_upload": null, "drafts": [], "predictions": [40],
    "data": {"answer": "Berlin", "choices_text": "Berlin | Bonn | Kiel | Ulm",
             "image": "/data/local-files/?d=nuscenes/cam1.jpg", "question": "Question q4 about nuscenes:cam1?",
             "reasonvqa": {"batch_id": "b-choices", "height": 40, "image_id": "nuscenes:cam1", "item_id": "q4",
                           "label_config": "sha256:1dd2eeaa96701aaed24535f2d1f5ef80c3b0aa6fe6e688872b07ea458d36b44a",
                           "mask_digests": {}, "question_id": "q4",
                           "regions": {"r0": "nuscenes:cam1/g1", "r1": "nuscenes:cam1/g2"}, "width": 50}},
    "meta": {}, "created_at": "2026-12-01T16:02:11.402118Z", "updated_at": "2026-12-02T09:14:03.958871Z",
    "inner_id": 4, "total_annotations": 1, "cancelled_annotations": 0, "total_predictions": 1,
    "comment_count": 0, "unresolved_comment_count": 0, "last_comment_updated_at": null, "project": 2,
    "updated_by": 3, "comment_authors": []
  },
  {
    "id": 42,
    "annotations": [
      {
        "id": 78, "completed_by": 3,
        "result": [
          {"id": "answer", "type": "textarea", "value": {"text": ["Rome"]}, "origin": "prediction-changed",
           "to_name": "image", "from_name": "answer"}
        ],
        "was_cancelled": false, "ground_truth": false,
        "created_at": "2026-12-02T09:15:40.101733Z", "updated_at": "2026-12-02T09:15:40.101760Z",
        "draft_created_at": null, "lead_time": 7.2, "prediction": {}, "result_count": 0,
        "unique_id": "9a0d44b2-2b7e-4d61-8f0e-3e5b1c7a6c42", "import_id": null, "last_action": null,
        "task": 42, "project": 2, "updated_by": 3, "parent_prediction": 41, "parent_annotation": null,
        "last_created_by": null
      }
    ],
    "file_upload": null, "drafts": [], "predictions": [41],
    "data": {"answer": "Madrid", "choices_text": "Madrid | Rome | Bern | Oslo",
             "image": "/data/local-files/?d=sa1b/2.jpg", "question": "Question q3 about sa1b:2?",
             "reasonvqa": {"batch_id": "b-choices", "height": 10, "image_id": "sa1b:2", "item_id": "q3",
                           "label_config": "sha256:1dd2eeaa96701aaed24535f2d1f5ef80c3b0aa6fe6e688872b07ea458d36b44a",
                           "mask_digests": {"r0": "88d552612eec167e", "r1": "5a123d07782bd1cc"}, "question_id": "q3",
                           "regions": {"r0": "sa1b:2/g1", "r1": "sa1b:2/g2"}, "width": 20}},
    "meta": {}, "created_at": "2026-12-01T16:02:11.402133Z", "updated_at": "2026-12-02T09:15:40.139201Z",
    "inner_id": 3, "total_annotations": 1, "cancelled_annotations": 0, "total_predictions": 1,
    "comment_count": 0, "unresolved_comment_count": 0, "last_comment_updated_at": null, "project": 2,
    "updated_by": 3, "comment_authors": []
  }
]
"""


def test_a_corrected_answer_that_is_not_one_of_the_choices_is_rejected_and_the_good_record_kept(tmp_path):
    release = write_counting_release(tmp_path / "out")
    store = tmp_path / "store"
    export_batch(release, tmp_path / "batch", "labelstudio", 100, store=store, batch_id="b-choices")
    exported = json.loads((tmp_path / "batch" / "tasks.json").read_text())
    assert {t["data"]["reasonvqa"]["label_config"] for t in exported} == {  # the fixture was exported from this batch
        json.loads(CHOICES_EXPORT)[0]["data"]["reasonvqa"]["label_config"]}
    (tmp_path / "project-2.json").write_text(CHOICES_EXPORT, encoding="utf-8")
    with pytest.raises(StoreError, match=r"first project-2.json#41.annotations\[0\].result\[0\]: answer_not_a_choice .*--strict"):
        import_decisions(tmp_path / "project-2.json", "labelstudio", store=store, strict=True)
    assert DecisionStore(store).decisions() == []

    report = import_decisions(tmp_path / "project-2.json", "labelstudio", store=store)
    assert report.rejects == [{"reason": "answer_not_a_choice", "source": "project-2.json#41.annotations[0].result[0]",
                               "detail": "answer 'Hamburg' is not one of the question's choices "
                                         "['Berlin', 'Bonn', 'Kiel', 'Ulm']"}]
    assert [(d["question_id"], d["action"], d["answer"]) for d in DecisionStore(store).decisions()] == [
        ("q3", "edit_answer", "Rome")]
    nxt = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    pool = {q["question_id"]: q for q in read_release(nxt).pool.to_pylist()}
    assert (pool["q3"]["answer"], pool["q3"]["choices"]) == ("Rome", ["Madrid", "Rome", "Bern", "Oslo"])
    assert (pool["q4"]["answer"], pool["q4"]["choices"]) == ("Berlin", ["Berlin", "Bonn", "Kiel", "Ulm"])


@pytest.mark.parametrize("mangle, where, reason", [
    (lambda t: "a string task", "m.json#[0]", "malformed_record"),
    (lambda t: {**t, "data": ["not", "an", "object"]}, "m.json#1", "malformed_record"),
    (lambda t: {**t, "data": {**t["data"], "reasonvqa": {**t["data"]["reasonvqa"], "item_id": ["q4"]}}},
     "m.json#1", "malformed_record"),
    (lambda t: {**t, "data": {**t["data"], "reasonvqa": {**t["data"]["reasonvqa"], "regions": ["r0"]}}},
     "m.json#1", "malformed_record"),
    (lambda t: {**t, "annotations": {"0": t["annotations"][0]}}, "m.json#1", "malformed_record"),
    (lambda t: {**t, "annotations": ["an annotation"]}, "m.json#1.annotations[0]", "malformed_record"),
    (lambda t: {**t, "annotations": [{**t["annotations"][0], "result": "wrong"}]}, "m.json#1.annotations[0]",
     "malformed_record"),
    (lambda t: {**t, "annotations": [{**t["annotations"][0], "result": ["a result"]}]}, "m.json#1.annotations[0]",
     "malformed_record"),
    (lambda t: {**t, "annotations": [{**t["annotations"][0], "result": [{**verdict("wrong"), "from_name": ["x"]}]}]},
     "m.json#1.annotations[0]", "labeling_config_mismatch"),
    (lambda t: {**t, "annotations": [{**t["annotations"][0], "result": [{**verdict("wrong"), "value": {"choices": {"a": 1}}}]}]},
     "m.json#1.annotations[0]", "malformed_record"),
])
def test_malformed_export_structure_is_one_located_reject_and_the_rest_is_kept(counting, mangle, where, reason):
    tmp_path, release, store, tasks = counting
    bad = mangle(annotate(tasks["q4"], [verdict("wrong")], task_id=1))
    export = write_json(tmp_path / "m.json", [bad, annotate(tasks["q6"], [verdict("wrong")], task_id=2)])
    report = import_decisions(export, "labelstudio", store=store)
    assert [(r["source"].split(".result")[0], r["reason"]) for r in report.rejects] == [(where, reason)]
    assert [(d["item_id"], d["action"]) for d in report.decisions] == [("q6", "wrong")]


def test_deeply_nested_or_non_list_export_is_one_line_naming_the_file(counting):
    tmp_path, release, store, tasks = counting
    (tmp_path / "deep.json").write_text('[{"data": ' + "[" * 100_000 + "]" * 100_000 + "}]")
    with pytest.raises(StoreError, match=r"^deep\.json: nesting deeper than 64 levels at byte 72;"):
        import_decisions(tmp_path / "deep.json", "labelstudio", store=store)
    (tmp_path / "digits.json").write_text('[{"id": ' + "9" * 5000 + "}]")  # more digits than Python converts
    with pytest.raises(StoreError, match=r"^digits\.json: not JSON \(Exceeds the limit \(4300 digits\)"):
        import_decisions(tmp_path / "digits.json", "labelstudio", store=store)
    write_json(tmp_path / "object.json", {"tasks": []})
    with pytest.raises(StoreError, match=r"^object\.json: a Label Studio JSON export is a list of tasks, got dict$"):
        import_decisions(tmp_path / "object.json", "labelstudio", store=store)
    assert DecisionStore(store).import_files() == []


def test_strict_imports_nothing_when_a_record_is_rejected_and_the_cli_lists_rejects(counting):
    tmp_path, release, store, tasks = counting
    export = write_json(tmp_path / "mixed.json", [annotate(tasks["q7"], [answer(["two"])], task_id=41),
                                                  annotate(tasks["q6"], [verdict("wrong")], task_id=42)])
    with pytest.raises(StoreError, match=r"1 record\(s\) rejected, first mixed\.json#41\.annotations\[0\]\.result\[0\]: "
                                         r"wrong_answer_type .* nothing imported \(--strict\)"):
        import_decisions(export, "labelstudio", store=store, strict=True)
    assert DecisionStore(store).import_files() == []
    runner = CliRunner()
    strict = runner.invoke(app, ["import", str(export), "--format", "labelstudio", "--store", str(store), "--strict"])
    assert strict.exit_code == 1 and strict.stderr.count("\n") == 1 and "mixed.json#41" in strict.stderr
    plain = runner.invoke(app, ["import", str(export), "--format", "labelstudio", "--store", str(store)])
    assert plain.exit_code == 0
    assert plain.stderr.startswith("rejected: mixed.json#41.annotations[0].result[0]: wrong_answer_type (answer 'two'")
    assert json.loads(plain.stdout)["decisions"] == 1


def test_a_count_corrected_without_evidence_is_set_aside_and_the_release_verifies(counting):
    tmp_path, release, store, tasks = counting
    export = write_json(tmp_path / "c.json", [annotate(tasks["q7"], [answer(["2"])], task_id=1)])
    assert import_decisions(export, "labelstudio", store=store).rejects == []
    path = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    assert verify_release(path) == []
    nxt = read_release(path)
    pool = {q["question_id"]: q for q in nxt.pool.to_pylist()}
    assert "q7" not in pool and len(pool) == 6
    listed = json.loads((path / "stats" / "annotation_decisions.json").read_text())
    assert [(a["question_id"], a["reason"]) for a in listed["set_aside"]] == [("q7", "count edited without evidence")]
    assert listed["used"] == [] and nxt.manifest["annotations"]["set_aside"] == 1
    report = json.loads((path / "stats" / "filter_report.json").read_text())
    assert report["set_aside_by_review"][0]["reason"] == "count edited without evidence"
    assert ("Review: 1 question(s) set aside, their corrections inconsistent with their evidence "
            "or choices (count edited without evidence); listed in stats/annotation_decisions.json.") in (path / "README.md").read_text()


def test_a_count_corrected_with_the_reviewers_box_is_applied_with_that_evidence(counting):
    tmp_path, release, store, tasks = counting
    results = prediction_results(tasks["q7"])
    results[-1]["value"]["text"] = ["2"]
    results.append(rectangle("n1", 60, 50, 20, 20))  # the second car, drawn by the reviewer
    export = write_json(tmp_path / "c.json", [annotate(tasks["q7"], results, task_id=1)])
    report = import_decisions(export, "labelstudio", store=store)
    assert report.rejects == [] and sorted(d["action"] for d in report.decisions) == ["add", "edit_answer"]
    path = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    assert verify_release(path) == []
    q7 = {q["question_id"]: q for q in read_release(path).pool.to_pylist()}["q7"]
    added = next(d["region_id"] for d in report.decisions if d["action"] == "add")
    assert q7["answer"] == "2" and q7["evidence_region_ids"] == ["nuscenes:cam1/g1", added]


def test_rejecting_a_counted_region_without_the_count_sets_the_question_aside(counting):
    tmp_path, release, store, tasks = counting
    export = write_json(tmp_path / "r.json", [annotate(tasks["q7"], [choice("r0", "reject")], task_id=1)])
    import_decisions(export, "labelstudio", store=store)
    path = resplit(release, tmp_path / "next", domain_match="any", decisions=store)
    assert verify_release(path) == []
    listed = json.loads((path / "stats" / "annotation_decisions.json").read_text())
    assert [(a["question_id"], a["reason"]) for a in listed["set_aside"]] == [("q7", "evidence edited without the count")]


def test_a_release_that_fails_verify_is_never_published_and_its_draft_kept_aside(tmp_path):
    wrong = question_rows() + [counting_question("q7", "3", ["nuscenes:cam1/g1"])]  # 3 counted, one region
    with pytest.raises(UnverifiedReleaseError, match=r"release cnt 1\.0\.0 fails verify \(2 problem\(s\), first: pool: 1 "
                                                     r"counting answers that are not the number of evidence regions"):
        write_counting_release(tmp_path / "out", wrong, verify_first=True)
    assert not (tmp_path / "out" / "cnt" / "1.0.0").exists()
    draft = tmp_path / "out" / "cnt" / ".1.0.0.unverified"
    assert (draft / "manifest.json").is_file()
    assert [p.name for p in (tmp_path / "out" / "cnt").iterdir()] == [".1.0.0.unverified"]
