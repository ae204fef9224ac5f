import json

from typer.testing import CliRunner

from reasonvqa.annotation_exports.batches import BatchFilters
from reasonvqa.flows.cli import app
from reasonvqa.flows.export_annotations import ExportParameters, export_annotations
from reasonvqa.flows.import_annotations import ImportParameters, import_annotations
from tests.annotation_exports.fixtures import write_fixture_release
from tests.annotation_exports.helpers import annotate, write_json


def test_export_and_import_flows_round_trip_a_batch(tmp_path):
    release = write_fixture_release(tmp_path / "out")
    store = tmp_path / "store"
    params = ExportParameters(format="labelstudio", source=release, out=tmp_path / "batch", size=2, store=store, seed=3,
                              filters=BatchFilters(sources=["sa1b"]))
    summary = export_annotations(params)
    assert summary["items"] == 2 and summary["batch_id"].startswith("b-")
    tasks = json.loads((tmp_path / "batch" / "tasks.json").read_text())
    verdict = {"id": "v", "from_name": "question_decision", "to_name": "image", "type": "choices",
               "value": {"choices": ["correct"]}}
    export = write_json(tmp_path / "ls.json", [annotate(t, [verdict], task_id=i + 1) for i, t in enumerate(tasks)])
    result = import_annotations(ImportParameters(format="labelstudio", file=export, store=store))
    assert result["decisions"] == 2 and result["actions"] == {"correct": 2} and result["rejected"] == {}
    # the next batch skips the decided items
    again = export_annotations(params.model_copy(update={"out": tmp_path / "batch2", "size": 10}))
    assert again["items"] == 1  # sa1b has three questions, two decided


def test_parameter_models_have_json_schemas_for_deployments():
    export_schema = ExportParameters.model_json_schema()
    assert set(export_schema["required"]) == {"format", "source", "out", "size"}
    assert ImportParameters.model_json_schema()["properties"]["format"]["enum"] == ["labelstudio", "cvat"]


def test_cli_export_then_import(tmp_path):
    release = write_fixture_release(tmp_path / "out")
    runner = CliRunner()
    done = runner.invoke(app, ["export", "--format", "cvat", "--source", str(release), "--size", "3", "--hops", "2",
                               "--out", str(tmp_path / "cvat"), "--store", str(tmp_path / "store")])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert summary["items"] == 3 and summary["files"][0].endswith("annotations.xml")
    text = (tmp_path / "cvat" / "annotations.xml").read_text().replace(
        "</meta>", "<dumped>2026-01-07 09:30:00+00:00</dumped></meta>")
    (tmp_path / "done.xml").write_text(text)
    done = runner.invoke(app, ["import", str(tmp_path / "done.xml"), "--format", "cvat", "--store", str(tmp_path / "store")])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["decisions"] == 0  # nothing changed, nothing decided
    bad = runner.invoke(app, ["export", "--format", "yolo", "--source", str(release), "--size", "3", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "one of labelstudio, cvat, coco" in bad.output


def test_flow_states_name_what_was_written_or_the_one_line_reason(tmp_path):
    release = write_fixture_release(tmp_path / "out")
    store = tmp_path / "store"
    exported = export_annotations(ExportParameters(format="cvat", source=release, out=tmp_path / "batch", size=2,
                                                   store=store), return_state=True)
    assert exported.is_completed()
    summary = exported.result()
    assert exported.message == f"batch {summary['batch_id']}: 2 items written to {tmp_path / 'batch'}"
    missing = tmp_path / "no-such-export.json"
    failed = import_annotations(ImportParameters(format="labelstudio", file=missing, store=store), return_state=True)
    assert failed.is_failed() and "\n" not in failed.message
    assert failed.message == f"StoreError: {missing}: no such file"
