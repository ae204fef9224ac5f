import os

import pyarrow as pa
import pytest

from reasonvqa.tasks.release.paths import (
    ReleasePathError, check_output_folder, check_release_name, check_release_version, inside, release_dir,
)
from reasonvqa.tasks.release.writer import write_release

BAD_VERSIONS = ["../../evil", "/abs/path", ".", "..", "", "1", "1.0", "1.0.0/../../x", "1.0.0\n", "v1.0.0"]
BAD_NAMES = ["..", ".", "../x", "a/b", "/abs", "Demo", "a..b", ".hidden", "", "a b", "a\x00b"]


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.parametrize("version", ["0.1.0", "2026.11.0", "0.1.0-gld", "1.0.0-resplit-0a1b2c3d", "1.0.0+build.5"])
def test_semantic_versions_pass(version):
    assert check_release_version(version) == version


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_other_versions_are_refused(version):
    with pytest.raises(ReleasePathError, match="not a semantic version"):
        check_release_version(version)


@pytest.mark.parametrize("name", ["reasonvqa", "reasonvqa-sample", "a.b_c-1"])
def test_lowercase_names_pass(name):
    assert check_release_name(name) == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_other_names_are_refused(name):
    with pytest.raises(ReleasePathError, match="is not allowed"):
        check_release_name(name)


def test_a_symlinked_name_folder_pointing_outside_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out" / "demo").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ReleasePathError, match="outside the output folder"):
        release_dir(tmp_path / "out", "demo", "1.0.0")


def test_inside_refuses_the_root_itself_and_parents(tmp_path):
    assert inside(tmp_path, tmp_path / "a" / "b") == (tmp_path / "a" / "b").resolve()
    for path in (tmp_path, tmp_path / "..", tmp_path / "a" / ".." / ".." / "x"):
        with pytest.raises(ReleasePathError):
            inside(tmp_path, path)


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ReleasePathError, match="not a folder"):
        check_output_folder(tmp_path / "f")


@pytest.mark.parametrize("name, version", [("demo", v) for v in BAD_VERSIONS] + [(n, "1.0.0") for n in BAD_NAMES])
def test_writer_writes_nothing_for_a_bad_name_or_version(tmp_path, splits, name, version):
    out = tmp_path / "deep" / "er" / "out"
    out.mkdir(parents=True)
    pool = pa.concat_tables(list(splits.values()))
    with pytest.raises(ReleasePathError):
        write_release(out, name, version, splits, pool=pool, stats_dir=None, config={}, inputs={})
    assert files_under(tmp_path) == []


def test_a_default_work_folder_whose_stage_folder_links_outside_is_refused(tmp_path):
    from reasonvqa.tasks.release.paths import ReleasePathError, default_work_folder

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    work = out / ".work" / "key"
    work.mkdir(parents=True)
    elsewhere.mkdir()
    assert default_work_folder(out, work) == work
    (out / "shared").mkdir()
    (work / "inside").symlink_to(out / "shared", target_is_directory=True)  # a link that stays inside --out is no escape
    assert default_work_folder(out, work) == work
    (work / "sources_vg").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ReleasePathError, match=rf"{work / 'sources_vg'} is a symlink to {elsewhere.resolve()}, outside"):
        default_work_folder(out, work)
    (work / "sources_vg").unlink()
    (work / "sources_vg" / "_rejects").mkdir(parents=True)
    (work / "sources_vg" / "_rejects" / "part-00000.parquet").symlink_to(elsewhere / "part-00000.parquet")
    with pytest.raises(ReleasePathError, match=rf"{work / 'sources_vg' / '_rejects' / 'part-00000.parquet'} is a symlink"):
        default_work_folder(out, work)  # a link deeper down, to a file (even one not there yet), is refused too
    (work / "sources_vg" / "_rejects" / "part-00000.parquet").unlink()
    (out / ".work").rename(out / ".work-real")
    (out / ".work").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ReleasePathError, match=r"outside the output folder .* name it with --work"):
        default_work_folder(out, out / ".work" / "key")
