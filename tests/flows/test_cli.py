import json

import pyarrow as pa
from typer.testing import CliRunner

from reasonvqa import schemas
from reasonvqa.flows.cli import app
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.release.conftest import question

runner = CliRunner()


def _release(tmp_path):
    train = schemas.from_rows([question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"])], schemas.QUESTIONS)
    test = schemas.from_rows([question("q2", "vg:2", "Rome", ["Rome", "Bern", "Oslo", "Kyiv"])], schemas.QUESTIONS)
    return write_release(tmp_path, "demo", "1.0.0", {"train": train, "test": test}, pool=pa.concat_tables([train, test]),
                         stats_dir=None, config={}, inputs={})


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


def _build(tmp_path, yaml_text: str, *extra: str):
    (tmp_path / "build.yaml").write_text(yaml_text)
    return runner.invoke(app, ["build", "--config", str(tmp_path / "build.yaml"), "--out", str(tmp_path / "out"), *extra])


def test_build_with_a_missing_image_data_json_names_it_without_a_traceback(tmp_path):
    (tmp_path / "vg").mkdir()
    (tmp_path / "vg" / "objects.json").write_text("[]")
    result = _build(tmp_path, "sources:\n  - {kind: vg, path: vg}\n")
    assert result.exit_code == 2
    assert result.output.strip() == f"error: Visual Genome image metadata not found: {tmp_path / 'vg' / 'image_data.json'}"
    assert not (tmp_path / "out").exists()  # refused before any work


def test_build_with_gldv2_landmarks_but_no_category_file_names_it(tmp_path):
    (tmp_path / "gld").mkdir()
    (tmp_path / "gld" / "train.csv").write_text("id,url,landmark_id\n381c96e045e92ba9,https://example.org/a.jpg,11\n")
    result = _build(tmp_path, "sources:\n  - {kind: gldv2, path: gld}\n")
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: GLDv2 landmark categories not found: {tmp_path / 'gld' / 'train_label_to_category.csv'}"
    )


def test_build_with_an_unknown_domain_names_it(tmp_path):
    (tmp_path / "vg").mkdir()
    for name in ("image_data.json", "objects.json"):
        (tmp_path / "vg" / name).write_text("[]")
    for given, problem in (("Places and Locations", "unknown domain 'Places and Locations'"), ("", "empty domain name"),
                           ("food,", "empty domain name")):
        result = _build(tmp_path, "sources:\n  - {kind: vg, path: vg}\n", "--domains", given)
        assert result.exit_code == 2
        assert result.output.startswith(f"error: --domains: {problem}; valid domains: Places & Locations (places);")
        assert "Food & Nutrition (food)" in result.output and "Traceback" not in result.output
    from_yaml = _build(tmp_path, "sources:\n  - {kind: vg, path: vg}\nquestions: {domains: [Cooking]}\n")
    assert from_yaml.exit_code == 2 and "unknown domain 'Cooking'; valid domains:" in from_yaml.output


def test_build_with_an_invalid_config_names_the_file_and_field(tmp_path):
    result = _build(tmp_path, "sources:\n  - {kind: coco, path: x}\n")
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {tmp_path / 'build.yaml'}: invalid config")
    assert "sources.0.kind" in result.output and "Traceback" not in result.output
    broken = _build(tmp_path, "sources: [\n")
    assert broken.exit_code == 2
    assert broken.output.startswith(f"error: {tmp_path / 'build.yaml'}: invalid YAML")


def test_build_with_a_misspelled_key_names_it(tmp_path):
    result = _build(tmp_path, "sources:\n  - {kind: vg, path: vg}\nknowledge: {endpont: http://x/sparql}\n")
    assert result.exit_code == 2
    assert "invalid config: knowledge.endpont: Extra inputs are not permitted" in result.output


def test_resplit_with_a_non_numeric_hop_is_a_usage_error(tmp_path):
    result = runner.invoke(app, ["resplit", str(_release(tmp_path)), "--hops", "two", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--hops" in result.output and "'two'" in result.output
    assert not isinstance(result.exception, ValueError)



def test_resplit_that_leaves_a_split_empty_is_refused_or_warns_when_allowed(tmp_path):
    one = schemas.from_rows([question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"])], schemas.QUESTIONS)
    source = write_release(tmp_path, "demo", "1.0.0", {"train": one}, pool=one, stats_dir=None, config={},
                           inputs={})
    refused = runner.invoke(app, ["resplit", str(source), "--version", "2.0.0", "--out", str(tmp_path / "o")])
    assert refused.exit_code == 2
    assert "error: release demo 2.0.0: split 'test' is empty" in refused.output
    result = runner.invoke(app, ["resplit", str(source), "--version", "2.0.0", "--allow-empty",
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 0
    assert f"warning: {tmp_path / 'o' / 'demo' / '2.0.0'}: split 'test' is empty" in result.output


def test_the_summary_of_a_build_on_a_work_folder_url_reads_its_run_report_from_the_url(tmp_path, monkeypatch):
    from reasonvqa import progress, workstore
    from reasonvqa.flows import cli
    from reasonvqa.stage import write_json
    from reasonvqa.storage import work_folder
    from tests.moto_s3 import s3_server

    with s3_server("summary"):
        build = work_folder("s3://summary/w", "b1")
        write_json({"link": {"rows_in": 7}}, build / "run_report.json")
        workstore.forget(build)  # the build ended: its mirror is gone
        seen = []
        monkeypatch.setattr(progress, "build_summary", lambda release, report: seen.append(json.loads(report.read_text())) or "")
        work = work_folder("s3://summary/w")  # what the CLI holds: a mirror path of another build id
        cli._print_summary(tmp_path, work)
    assert seen == [{"link": {"rows_in": 7}}]
    assert not work.exists()


def test_serve_documents_every_option():
    from typer.main import get_command

    serve = get_command(app).commands["serve"]
    assert [p.name for p in serve.params if not p.help] == []
    flags = {p.name: p for p in serve.params}
    assert flags["sample"].is_flag and flags["replace"].is_flag  # flags, not options taking a value
    assert "not both" in flags["sample"].help and "not both" in flags["config"].help
    assert "--timezone" in flags["cron"].help and flags["timezone"].default == "UTC"
    assert "resplit/<name>" in flags["name"].help


def test_serve_enforces_its_exclusive_flags_and_checks_the_schedule(tmp_path):
    both = runner.invoke(app, ["serve", "--name", "x", "--sample", "--config", __file__, "--out", str(tmp_path)])
    assert both.exit_code == 2 and "mutually exclusive" in both.output
    neither = runner.invoke(app, ["serve", "--name", "x", "--out", str(tmp_path)])
    assert neither.exit_code == 2 and "exactly one of --sample or --config" in neither.output
    zone = runner.invoke(app, ["serve", "--name", "x", "--sample", "--cron", "0 3 * * 1", "--timezone", "Mars/Base"])
    assert zone.exit_code == 2
    assert zone.output == "error: --timezone: 'Mars/Base' is not an IANA time zone name (e.g. UTC, Europe/Paris)\n"
    cron = runner.invoke(app, ["serve", "--name", "x", "--sample", "--cron", "0 3 * *"])
    assert cron.exit_code == 2 and cron.output.startswith("error: --cron: '0 3 * *' is not a cron expression")
