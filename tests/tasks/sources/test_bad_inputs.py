"""The bad-input corpus (tests/tasks/sources/bad_inputs/): each case ends in exact accounting or one line naming
file and place, never a crash, a silent default or records missing from an exit-0 build."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from reasonvqa.flows.cli import app
from reasonvqa.jsonstream import JsonSourceError, iter_json_array
from reasonvqa.stage import stage_stats
from reasonvqa.tasks.sources.gldv2_side import CsvColumnError
from reasonvqa.tasks.sources.vg import ingest_vg

from tests.tasks.sources.conftest import read_gldv2_folder

CORPUS = Path(__file__).parent / "bad_inputs"
runner = CliRunner()

FATAL_VG = {
    "vg_invalid_utf8": r"invalid JSON in record \[1\] within bytes \[0:\d+\]",
    "vg_nan": r"invalid JSON in record \[1\] within bytes \[0:\d+\]",
    "vg_1e999": r"invalid JSON in record \[1\] within bytes \[0:\d+\]",
    "vg_int_beyond_2_63": r"invalid JSON in record \[1\] within bytes \[0:\d+\]",
    "vg_deep_nesting": "nesting deeper than 64 levels at byte ",
}


def accounted(stage_dir: Path) -> dict:
    stats = stage_stats(stage_dir)
    for shard in stats:
        assert shard["rows_in"] == shard["rows_out"] + sum(shard["rejected"].values())
    return {k: sum(s[k] if k != "rejected" else sum(s[k].values()) for s in stats) for k in ("rows_in", "rows_out", "rejected")}


@pytest.mark.parametrize("case", sorted(FATAL_VG))
def test_corrupt_vg_json_stops_the_read_naming_file_and_place(case, tmp_path):
    with pytest.raises(JsonSourceError, match=FATAL_VG[case]) as error:
        ingest_vg(CORPUS / case, tmp_path / "stage")
    assert str(CORPUS / case / "objects.json") in str(error.value)
    assert not (tmp_path / "stage" / "_done" / "ALL").exists()  # never a finished stage with records missing


@pytest.mark.parametrize("case", sorted(FATAL_VG))
def test_corrupt_vg_json_is_one_line_and_exit_1_on_the_command_line(case):
    result = runner.invoke(app, ["sources", "scan", "--source", "vg", "--path", str(CORPUS / case)])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: JsonSourceError: {CORPUS / case / 'objects.json'}")
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_a_record_over_the_size_bound_stops_before_it_is_built():
    path = CORPUS / "vg_huge_record" / "objects.json"
    read = []
    with pytest.raises(JsonSourceError, match=r"a record larger than 100000 bytes at byte \d+ \(records \[0:\d\] were read\)"):
        for item in iter_json_array(path, max_record_bytes=100_000):
            read.append(item)
    assert read[0][1]["image_id"] == 1
    assert [i for i, _ in iter_json_array(path)] == [0, 1, 2]  # within the default bound it is read


def test_a_width_beyond_int32_rejects_that_image_alone(tmp_path):
    ingest_vg(CORPUS / "vg_width_3e9", tmp_path / "stage")
    images = pq.read_table(tmp_path / "stage" / "images" / "part-00000.parquet")
    assert images["image_id"].to_pylist() == ["vg:1", "vg:3"]
    rejects = pq.read_table(tmp_path / "stage" / "_rejects" / "part-00000.parquet").to_pylist()
    assert sorted(r["reason"] for r in rejects) == ["image_bad_size", "image_rejected"]  # the image and its object
    assert accounted(tmp_path / "stage") == {"rows_in": 6, "rows_out": 4, "rejected": 2}


def test_attributes_json_as_a_folder_is_named():
    with pytest.raises(FileNotFoundError, match="Visual Genome attributes.json is not a file: .*vg_attributes_is_a_folder"):
        ingest_vg(CORPUS / "vg_attributes_is_a_folder", Path("/nonexistent/never-written"))


def test_gldv2_rows_with_invalid_utf8_are_rejected_not_replaced(tmp_path):
    read_gldv2_folder(CORPUS / "gldv2_invalid_utf8", tmp_path / "stage")
    images = pq.read_table(tmp_path / "stage" / "images" / "part-00000.parquet")
    assert images["source_image_id"].to_pylist() == ["381c96e045e92ba9", "70f8cc6a09f4ba12"]
    assert not any("\ufffd" in (u or "") for u in images["url"].to_pylist())
    rejects = pq.read_table(tmp_path / "stage" / "_rejects" / "part-00000.parquet").to_pylist()
    assert sorted((r["reason"], r["source"]) for r in rejects) == [
        ("csv_invalid_utf8", "train.csv:3"), ("csv_invalid_utf8", "train_label_to_category.csv:3")]
    assert accounted(tmp_path / "stage") == {"rows_in": 4, "rows_out": 2, "rejected": 2}  # 3 train rows + 1 category row


@pytest.mark.parametrize("config, message", [
    ("config_not_utf8.yaml", "not UTF-8 text (byte "),
    ("config_ftp_endpoint.yaml", "invalid config: knowledge.endpoint: String should match pattern"),
    ("config_contact_crlf.yaml", "invalid config: knowledge.contact: String should match pattern"),
])
def test_bad_configs_are_one_line_and_exit_2(config, message, tmp_path):
    result = runner.invoke(app, ["build", "--config", str(CORPUS / config), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {CORPUS / config}: ") and message in result.output
    assert result.output.count("\n") == 1


def test_a_train_csv_without_landmark_id_is_a_data_error_naming_file_and_column(tmp_path):
    folder = CORPUS / "gldv2_no_landmark_id"
    with pytest.raises(CsvColumnError, match=rf"^{folder / 'train.csv'}: required column 'landmark_id' missing "
                                             r"\(header: id,url\)$"):
        read_gldv2_folder(folder, tmp_path / "stage")
    assert not (tmp_path / "stage" / "_done" / "ALL").exists()  # never 12 images and 0 objects without a word
    result = runner.invoke(app, ["sources", "scan", "--source", "gldv2", "--path", str(folder)])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"error: CsvColumnError: {folder / 'train.csv'}: required column 'landmark_id'")


def test_an_unbalanced_quote_is_reported_at_the_line_where_its_record_starts(tmp_path):
    read_gldv2_folder(CORPUS / "gldv2_unbalanced_quote", tmp_path / "stage")
    rejects = pq.read_table(tmp_path / "stage" / "_rejects" / "part-00000.parquet").to_pylist()
    assert [(r["reason"], r["source"]) for r in rejects] == [("csv_row_malformed", "train.csv:3")]
    assert "00000000000000a9" in rejects[0]["record"]  # the ten lines it swallowed are in the reject, not lost
    assert accounted(tmp_path / "stage") == {"rows_in": 2, "rows_out": 1, "rejected": 1}


def test_a_vg_objects_json_cut_in_half_is_a_data_error_for_the_file(tmp_path):
    objects = CORPUS / "vg_truncated" / "objects.json"
    with pytest.raises(JsonSourceError, match=rf"^{objects}: truncated: the file ends inside record \[1\] "
                                              r"\(bytes \[0:\d+\]\); records \[0:1\] were read"):
        ingest_vg(CORPUS / "vg_truncated", tmp_path / "stage")
    assert not (tmp_path / "stage" / "_done" / "ALL").exists()
    result = runner.invoke(app, ["sources", "scan", "--source", "vg", "--path", str(CORPUS / "vg_truncated")])
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output.startswith(f"error: JsonSourceError: {objects}: truncated")


def test_sandbox_run_on_a_100000_deep_graph_is_one_line_naming_the_file(tmp_path):
    graph = tmp_path / "deep_graph.json"  # 200 kB: written here rather than kept in the corpus
    graph.write_text('{"caption": "x", "tuples": ' + "[" * 100_000 + "]" * 100_000 + "}")
    program = tmp_path / "program.py"
    program.write_text("def verify(sg):\n    return True\n")
    result = runner.invoke(app, ["sandbox", "run", str(program), "--graph", str(graph)])
    assert result.exit_code == 2
    assert result.output == f"error: {graph}: nesting deeper than 64 levels at byte 90\n"
