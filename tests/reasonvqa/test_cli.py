import json

import pyarrow as pa
from typer.testing import CliRunner

from reasonvqa.cli import app
from tasks.release.writer import write_release
from tests.tasks.release.conftest import question
from reasonvqa import schemas

runner = CliRunner()


def _release(tmp_path):
    train = schemas.from_rows([question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"])], schemas.QUESTIONS)
    test = schemas.from_rows([question("q2", "vg:2", "Rome", ["Rome", "Bern", "Oslo", "Kyiv"])], schemas.QUESTIONS)
    return write_release(tmp_path, "demo", "1", {"train": train, "test": test}, pool=pa.concat_tables([train, test]),
                         stats_dir=None, config={}, config_hash="h", inputs={})


def test_verify_ok_then_fails_after_one_byte_changes(tmp_path):
    path = _release(tmp_path)
    ok = runner.invoke(app, ["verify", str(path)])
    assert ok.exit_code == 0 and ok.output.strip() == f"OK {path}"
    part = path / "test" / "part-00000.parquet"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    bad = runner.invoke(app, ["verify", str(path)])
    assert bad.exit_code == 1
    assert "FAIL test/part-00000.parquet: sha256 mismatch" in bad.output


def test_build_needs_exactly_one_input(tmp_path):
    result = runner.invoke(app, ["build", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "exactly one of --sample or --config" in result.output


def test_build_with_a_missing_source_folder_names_it(tmp_path):
    (tmp_path / "build.yaml").write_text("sources:\n  - {kind: vg, path: no_such_folder}\n")
    result = runner.invoke(app, ["build", "--config", str(tmp_path / "build.yaml"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert f"source folder not found: vg: {tmp_path / 'no_such_folder'}" in result.output
