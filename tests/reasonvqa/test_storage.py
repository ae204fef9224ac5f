import importlib.util
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.storage import (
    MissingBackend, RemoteWorkFolder, filesystem, local_work_folder, protocol, upload_release, work_folder,
)
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.release.conftest import question


def test_protocol_of_paths_and_urls():
    assert protocol("out") is None
    assert protocol("/data/out") is None
    assert protocol("file:///data/out") is None
    assert protocol("s3://bucket/releases") == "s3"
    assert protocol("memory://x") == "memory"


def test_missing_backend_names_the_extra_to_install(hide_module):
    hide_module("s3fs")  # the test extra installs s3fs; a user without it gets this message
    with pytest.raises(MissingBackend, match=r"pip install 'reasonvqa-pipeline\[s3\]' \(installs s3fs\)"):
        filesystem("s3://bucket/releases")


def test_unknown_protocol_is_refused():
    with pytest.raises(MissingBackend, match="nosuchfs"):
        filesystem("nosuchfs://bucket/releases")


def test_upload_copies_every_file_and_keeps_an_identical_copy(tmp_path):
    splits = {"train": schemas.from_rows([question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"])],
                                         schemas.QUESTIONS),
              "test": schemas.from_rows([question("q2", "vg:2", "Rome", ["Rome", "Bern", "Oslo", "Riga"])],
                                        schemas.QUESTIONS)}
    pool = pa.concat_tables(list(splits.values()))
    release = write_release(tmp_path, "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                            inputs={"vg": "s1"})
    url = upload_release(release, "memory://uploads/out")
    assert url == "memory://uploads/out/demo/1.0.0"
    fs = fsspec.filesystem("memory")
    local = sorted(p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file())
    remote = sorted(f.removeprefix("/uploads/out/demo/1.0.0/") for f in fs.find("/uploads/out/demo/1.0.0"))
    assert remote == local
    assert fs.cat_file("/uploads/out/demo/1.0.0/manifest.json") == (release / "manifest.json").read_bytes()
    modified = fs.info("/uploads/out/demo/1.0.0/manifest.json")["created"]
    assert upload_release(release, "memory://uploads/out") == url
    assert fs.info("/uploads/out/demo/1.0.0/manifest.json")["created"] == modified  # not uploaded again
    assert not fs.exists("/uploads/out/demo/1.0.0.uploading")


def test_upload_refuses_to_replace_other_content_unless_overwrite(tmp_path):
    from reasonvqa.errors import ReleaseExistsError

    def release_with(answer: str, folder: str):
        splits = {"train": schemas.from_rows([question("q1", "vg:1", answer, [answer, "Lyon", "Nice", "Lille"])],
                                             schemas.QUESTIONS),
                  "test": schemas.from_rows([question("q2", "vg:2", "Rome", ["Rome", "Bern", "Oslo", "Riga"])],
                                            schemas.QUESTIONS)}
        return write_release(tmp_path / folder, "demo", "1.0.0", splits, pool=pa.concat_tables(list(splits.values())),
                             stats_dir=None, config={"seed": 0}, inputs={"vg": "s1"})

    first, second = release_with("Paris", "a"), release_with("Tours", "b")
    url = upload_release(first, "memory://replace/out")
    with pytest.raises(ReleaseExistsError, match="memory://replace/out/demo/1.0.0 exists with different content"):
        upload_release(second, "memory://replace/out")
    fs = fsspec.filesystem("memory")
    assert fs.cat_file("/replace/out/demo/1.0.0/manifest.json") == (first / "manifest.json").read_bytes()
    assert upload_release(second, "memory://replace/out", overwrite=True) == url
    assert fs.cat_file("/replace/out/demo/1.0.0/manifest.json") == (second / "manifest.json").read_bytes()


@pytest.mark.parametrize("url", ["s3://bucket/work", "gs://bucket/work", "memory://work", "nosuchfs://x"])
def test_a_work_folder_url_is_refused_by_verified_qa_saying_why(url):
    with pytest.raises(RemoteWorkFolder) as refused:
        local_work_folder(url)
    message = str(refused.value)
    assert message.startswith(f"work folder {url}: give a local path, or a shared mount")
    assert "supported by build-reasonvqa only" in message and "\n" not in message


def test_a_work_folder_path_is_kept_and_file_urls_become_paths(tmp_path):
    for check in (local_work_folder, work_folder):
        assert check(str(tmp_path / "w")) == tmp_path / "w"
        assert check("relative/w") == Path("relative/w")
        assert check(f"file://{tmp_path}/w") == tmp_path / "w"


def test_a_work_folder_url_becomes_this_process_mirror_of_it_for_one_build():
    from reasonvqa import workstore

    mirror = work_folder("s3://bucket/work/", "b1")
    assert mirror == workstore.mirror_base() / "build-b1" / "s3" / "bucket" / "work"
    assert workstore.is_mirrored(mirror) and not workstore.is_mirrored(Path("/data/work"))
    fresh = work_folder("s3://bucket/work")
    assert fresh.parent.parent.parent.name.startswith("build-") and fresh != mirror  # a new build id


def test_a_process_local_work_folder_url_is_refused():
    with pytest.raises(RemoteWorkFolder, match=r"^work folder memory://w: a memory:// file system lives in one process"):
        work_folder("memory://w")


@pytest.mark.parametrize("url, extra, package", [("gs://bucket/work", "gcs", "gcsfs"), ("az://box/work", "azure", "adlfs")])
def test_a_work_folder_url_without_its_backend_names_the_extra(url, extra, package):
    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    with pytest.raises(MissingBackend, match=rf"pip install 'reasonvqa-pipeline\[{extra}\]' \(installs {package}\)"):
        work_folder(url)
