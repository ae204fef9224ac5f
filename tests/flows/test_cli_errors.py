"""Bad paths and bad requests end in one line and exit 2, and nothing is written outside --out."""

import importlib.util
import os

import pytest
from typer.testing import CliRunner

import typer

from reasonvqa.flows.cli import OneLineErrors, app, main
from tests.flows.test_cli import _release
from tests.tasks.release.test_verify import _resign

runner = CliRunner()


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def one_error_line(result, code):
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert "Traceback" not in result.output
    return "\n".join(lines)


@pytest.mark.parametrize("version", ["../../evil", "/abs/path", ".", ".."])
def test_build_with_a_path_as_version_writes_nothing(tmp_path, version):
    out = tmp_path / "a" / "out"
    result = runner.invoke(app, ["build", "--sample", "--out", str(out), "--version", version, "--overwrite"])
    assert "not a semantic version" in one_error_line(result, 2)
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("release", ["{name: '..', version: 1.0.0}", "{name: ../x, version: 1.0.0}",
                                     "{name: ok, version: ../../evil}"])
def test_build_with_a_path_in_the_config_release_writes_nothing(tmp_path, release):
    config = tmp_path / "c.yaml"
    config.write_text(f"sources: [{{kind: vg, path: vg}}]\nrelease: {release}\n")
    result = runner.invoke(app, ["build", "--config", str(config), "--out", str(tmp_path / "out")])
    assert "invalid config: release." in one_error_line(result, 2)
    assert files_under(tmp_path) == ["c.yaml"]


def test_out_that_is_a_file(tmp_path):
    (tmp_path / "out").write_text("x")
    result = runner.invoke(app, ["build", "--sample", "--out", str(tmp_path / "out")])
    assert "exists and is not a folder" in one_error_line(result, 2)


@pytest.mark.parametrize("command, work, says", [
    (["build", "--sample"], "memory://bucket/work", "a memory:// file system lives in one process"),
    (["build-verified-qa", "--config", "{config}"], "s3://bucket/work", "give a local path, or a shared mount"),
])
def test_a_work_folder_url_is_refused_before_any_work(tmp_path, command, work, says):
    config = tmp_path / "verified.yaml"
    config.write_text("graphs: {kind: vg, path: vg}\n")
    args = [a.format(config=config) for a in command]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out"), "--work", work])
    line = one_error_line(result, 2)
    assert line.startswith(f"error: work folder {work}: {says}")
    assert files_under(tmp_path) == ["verified.yaml"]


def test_an_out_url_without_its_backend_names_the_extra(tmp_path, hide_module):
    hide_module("s3fs")  # the test extra installs s3fs; a user without it gets this line
    result = runner.invoke(app, ["build", "--sample", "--out", "s3://bucket/releases"])
    line = one_error_line(result, 2)
    assert line == ("error: s3://bucket/releases: no s3:// filesystem installed; "
                    "pip install 'reasonvqa-pipeline[s3]' (installs s3fs)")


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed here")
def test_a_work_url_without_its_backend_names_the_extra(tmp_path):
    result = runner.invoke(app, ["build", "--sample", "--out", str(tmp_path / "out"), "--work", "gs://bucket/work"])
    line = one_error_line(result, 2)
    assert line == ("error: gs://bucket/work: no gs:// filesystem installed; "
                    "pip install 'reasonvqa-pipeline[gcs]' (installs gcsfs)")
    assert files_under(tmp_path) == []


def test_domains_that_name_nothing(tmp_path):
    result = runner.invoke(app, ["build", "--sample", "--out", str(tmp_path), "--domains", ","])
    assert "empty domain name; valid domains: Places & Locations (places)" in one_error_line(result, 2)
    assert files_under(tmp_path) == []


def test_config_that_is_not_utf8(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_bytes(b"sources: [{kind: vg, path: \xff\xfe}]\n")
    result = runner.invoke(app, ["build", "--config", str(config), "--out", str(tmp_path / "out")])
    assert f"error: {config}: not UTF-8 text (byte 27: invalid start byte)" in one_error_line(result, 2)


@pytest.mark.parametrize("knowledge, field", [
    ("{endpoint: 'ftp://example.org/sparql'}", "knowledge.endpoint"),
    ("{endpoint: 'file:///etc/passwd'}", "knowledge.endpoint"),
    ('{contact: "me@example.org\\r\\nX-Injected: 1"}', "knowledge.contact"),
    ('{contact: "me@example.org\\n"}', "knowledge.contact"),
])
def test_endpoint_and_contact_are_checked_by_the_config(tmp_path, knowledge, field):
    config = tmp_path / "c.yaml"
    config.write_text(f"sources: [{{kind: vg, path: vg}}]\nknowledge: {knowledge}\n")
    result = runner.invoke(app, ["build", "--config", str(config), "--out", str(tmp_path / "out")])
    assert f"invalid config: {field}: String should match pattern" in one_error_line(result, 2)


@pytest.mark.parametrize("field, value", [("name", "../../evil"), ("version", "../../evil"), ("version", "."),
                                          ("name", "other")])
def test_resplit_refuses_a_source_whose_manifest_names_another_place(tmp_path, field, value):
    source = _release(tmp_path / "src")
    _resign(source, lambda m: m.__setitem__(field, value))
    before = files_under(tmp_path)
    result = runner.invoke(app, ["resplit", str(source), "--out", str(tmp_path / "x" / "out")])
    assert "fails verification" in one_error_line(result, 2)
    assert files_under(tmp_path) == before


def test_resplit_with_a_path_as_version(tmp_path):
    source = _release(tmp_path / "src")
    before = files_under(tmp_path)
    result = runner.invoke(app, ["resplit", str(source), "--out", str(tmp_path / "o"), "--version", "../../evil"])
    assert "not a semantic version" in one_error_line(result, 2)
    assert files_under(tmp_path) == before


def test_a_folder_where_a_vg_file_belongs_is_named(tmp_path):
    (tmp_path / "vg").mkdir()
    (tmp_path / "vg" / "image_data.json").write_text("[]")
    (tmp_path / "vg" / "objects.json").write_text("[]")
    (tmp_path / "vg" / "attributes.json").mkdir()  # silently ignored before
    result = runner.invoke(app, ["sources", "scan", "--source", "vg", "--path", str(tmp_path / "vg")])
    assert f"is not a file: {tmp_path / 'vg' / 'attributes.json'}" in one_error_line(result, 2)


def _failing_app():
    demo = typer.Typer(cls=OneLineErrors, pretty_exceptions_enable=False)
    demo.callback()(main)

    @demo.command()
    def crash() -> None:
        raise KeyError("multi\nline")

    return demo


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback():
    plain = runner.invoke(_failing_app(), ["crash"])
    assert plain.exit_code == 1
    assert plain.output == "error: KeyError: 'multi\\nline' (reasonvqa --debug ... shows the traceback)\n"
    debug = runner.invoke(_failing_app(), ["--debug", "crash"])
    assert isinstance(debug.exception, KeyError)


def test_build_with_an_unknown_embed_images_mode_writes_nothing(tmp_path):
    result = runner.invoke(app, ["build", "--sample", "--out", str(tmp_path / "out"), "--embed-images", "always"])
    assert "--embed-images is auto or never" in one_error_line(result, 2)
    assert files_under(tmp_path) == []


def test_a_symlinked_work_folder_under_out_is_refused_and_nothing_written_outside(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / ".work").symlink_to(elsewhere, target_is_directory=True)
    result = runner.invoke(app, ["build", "--sample", "--out", str(out)])
    line = one_error_line(result, 2)
    assert f"resolves to {elsewhere.resolve()}, outside" in line and "outside the output folder" in line and "--work" in line
    assert files_under(elsewhere) == [] and files_under(out) == []


def test_a_symlinked_work_folder_named_with_work_is_used(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / ".work").symlink_to(elsewhere, target_is_directory=True)
    config = tmp_path / "c.yaml"
    config.write_text(f"sources: [{{kind: vg, path: {tmp_path / 'missing'}}}]\n")
    refused = runner.invoke(app, ["build", "--config", str(config), "--out", str(out)])
    assert "outside the output folder" in one_error_line(refused, 2)
    named = runner.invoke(app, ["build", "--config", str(config), "--out", str(out), "--work", str(out / ".work")])
    # past the containment check: the build stops at its next check, the missing source folder
    assert one_error_line(named, 2) == f"error: source folder not found: vg: {tmp_path / 'missing'}"


@pytest.mark.parametrize("flag, value, says", [
    ("--version", "1.0.0-" + "a" * 245, "release version is 251 bytes; the file system under"),
    ("--out-parent-file", "", "is a file, not a folder"),
])
def test_names_too_long_and_an_out_below_a_file_are_usage_errors_before_any_work(tmp_path, flag, value, says):
    (tmp_path / "a_file").write_text("x")
    out = tmp_path / "a_file" / "sub" if flag == "--out-parent-file" else tmp_path / "out"
    extra = [flag, value] if flag == "--version" else []
    result = runner.invoke(app, ["build", "--sample", "--out", str(out), *extra])
    assert says in one_error_line(result, 2)
    assert files_under(tmp_path) == ["a_file"]


def test_a_resplit_version_beyond_the_name_limit_is_refused_before_the_source_is_read(tmp_path):
    (tmp_path / "not_a_release").mkdir()  # never opened: the version is refused first
    result = runner.invoke(app, ["resplit", str(tmp_path / "not_a_release"), "--out", str(tmp_path / "o"),
                                 "--version", "1.0.0-" + "a" * 245])
    assert one_error_line(result, 2).startswith("error: release version is 251 bytes; the file system under")
    assert files_under(tmp_path) == [] and not (tmp_path / "o").exists()


def test_a_release_name_beyond_the_name_limit_is_refused_before_the_build(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"sources: [{{kind: vg, path: vg}}]\nrelease: {{name: {'n' * 300}, version: 1.0.0}}\n")
    result = runner.invoke(app, ["build", "--config", str(config), "--out", str(tmp_path / "out")])
    assert "release name is 300 bytes; the file system under" in one_error_line(result, 2)
    assert files_under(tmp_path) == ["c.yaml"]


@pytest.mark.parametrize("flag", ["--domains", "--sources", "--hops", "--kinds", "--task-types"])
@pytest.mark.parametrize("value", [",", "", " , ,"])
def test_resplit_filters_that_name_nothing_are_usage_errors(tmp_path, flag, value):
    source = _release(tmp_path / "src")
    before = files_under(tmp_path)
    result = runner.invoke(app, ["resplit", str(source), "--out", str(tmp_path / "o"), flag, value])
    assert "names no" in one_error_line(result, 2) or "names nothing" in one_error_line(result, 2)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("flag", ["--domains", "--kinds", "--task-types", "--hallucination"])
@pytest.mark.parametrize("value", [",", ""])
def test_build_filters_that_name_nothing_are_usage_errors(tmp_path, flag, value):
    result = runner.invoke(app, ["build", "--sample", "--out", str(tmp_path / "out"), flag, value])
    assert one_error_line(result, 2).startswith("error: ")
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("value", [",", ""])
def test_a_resplit_hallucination_filter_that_names_nothing_is_a_usage_error(tmp_path, value):
    source = _release(tmp_path / "src")
    before = files_under(tmp_path)
    result = runner.invoke(app, ["resplit", str(source), "--out", str(tmp_path / "o"), "--hallucination", value])
    assert one_error_line(result, 2) == "error: Invalid value for --hallucination: is one of only, exclude"
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("args, says", [
    (["build", "--sample", "--hallucination", "maybe"], "error: Invalid value for --hallucination: is one of only, exclude"),
    (["resplit", "src", "--hops", "two"], "error: Invalid value for --hops: hop counts are whole numbers"),
    (["build", "--sample", "--bogus"], "error: No such option: --bogus"),
    (["--bogus"], "error: No such option: --bogus"),
    (["import", "missing.json", "--format", "labelstudio"], "error: Invalid value for 'file'"),
])
def test_typer_usage_errors_are_one_line_not_a_box(tmp_path, args, says):
    result = runner.invoke(app, args)
    line = one_error_line(result, 2)
    assert line.startswith(says) and line.count("\n") == 0 and "╭" not in result.output


def test_a_build_names_a_held_work_folder_before_prefect_starts(tmp_path, capsys):
    from reasonvqa.flows.cli import _tell_busy_work_folders
    from tests.reasonvqa.test_locks import _holder

    lock = tmp_path / "out" / ".work" / "abc" / ".lock"
    child = _holder(lock)
    try:
        _tell_busy_work_folders(tmp_path / "out", None)
        _tell_busy_work_folders(tmp_path / "out", tmp_path / "out" / ".work" / "abc")
    finally:
        child.kill()
        child.wait()
    said = f"warning: build work folder {lock.parent} is in use by pid {child.pid}; a build that needs it waits"
    assert capsys.readouterr().err.count(said) == 2
    _tell_busy_work_folders(tmp_path / "out", None)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", [
    ["resplit", "{release}"],
    ["export", "--format", "labelstudio", "--source", "{release}", "--size", "2"],
    ["build-verified-qa", "--config", "{config}"],
])
def test_an_out_below_a_file_is_a_usage_error_for_every_command(tmp_path, command):
    release = _release(tmp_path / "src")
    config = tmp_path / "verified.yaml"
    config.write_text("graphs: {kind: vg, path: vg}\n")
    (tmp_path / "a_file").write_text("x")
    before = files_under(tmp_path)
    args = [a.format(release=release, config=config) for a in command]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "a_file" / "sub")])
    assert f"{tmp_path / 'a_file'} is a file, not a folder" in one_error_line(result, 2)
    assert files_under(tmp_path) == before
