"""Where a build writes: its release target (a folder, or local staging uploaded to a URL) and the work folder it holds."""

from pathlib import Path

import fsspec
import pyarrow as pa
import pytest

from reasonvqa import schemas, workstore
from reasonvqa.flows.config import ReleaseConfig
from reasonvqa.flows.work_session import ReleaseTarget, always_held, forget_mirrors, local_staging, tell, work_session
from reasonvqa.locks import LockHeldError, exclusive_lock
from reasonvqa.tasks.release.paths import ReleasePathError
from reasonvqa.tasks.release.writer import write_release
from tests.moto_s3 import s3_filesystem, s3_server
from tests.tasks.release.conftest import question

RELEASE = ReleaseConfig(name="demo", version="1.0.0")


def tiny_release(out: Path) -> Path:
    splits = {"train": schemas.from_rows([question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"])],
                                         schemas.QUESTIONS),
              "test": schemas.from_rows([question("q2", "vg:2", "Rome", ["Rome", "Bern", "Oslo", "Riga"])],
                                        schemas.QUESTIONS)}
    return write_release(out, "demo", "1.0.0", splits, pool=pa.concat_tables(list(splits.values())), stats_dir=None,
                         config={}, inputs={"source:vg": "sha256:x"})


def test_a_local_target_is_the_out_folder_itself(tmp_path):
    target = ReleaseTarget.of(str(tmp_path / "out"), False, RELEASE)
    assert (target.out_dir, target.local_overwrite) == (tmp_path / "out", False)
    release = tiny_release(target.out_dir)
    assert target.publish(release) == str(release)


def test_a_url_target_builds_in_local_staging_and_uploads_the_release(tmp_path):
    target = ReleaseTarget.of("memory://targets/out", False, RELEASE)
    assert target.out_dir == local_staging("memory://targets/out") != local_staging("memory://targets/other")
    assert target.local_overwrite  # the staging copy is replaced; whether the URL's may be is decided there
    url = target.publish(tiny_release(tmp_path / "staging"))
    assert url == "memory://targets/out/demo/1.0.0"
    assert fsspec.filesystem("memory").exists("/targets/out/demo/1.0.0/manifest.json")


def test_a_release_path_outside_out_is_refused_before_any_work(tmp_path):
    with pytest.raises(ReleasePathError):
        ReleaseTarget.of(str(tmp_path / "out"), False, RELEASE.model_construct(name="../up", version="1.0.0"))


def test_a_local_build_holds_its_default_work_folder_under_out_until_the_block_ends(tmp_path):
    with work_session(None, tmp_path / "out", "0123abcd") as session:
        assert session.work_dir == tmp_path / "out" / ".work" / "0123abcd" and session.work_dir.is_dir()
        assert session.still_held is always_held
        with pytest.raises(LockHeldError):
            with exclusive_lock(session.work_dir / ".lock", "build work folder", wait=False):
                pass
    with exclusive_lock(session.work_dir / ".lock", "build work folder", wait=False):
        pass
    with work_session(str(tmp_path / "mine"), tmp_path / "out", "0123abcd") as session:  # --work names it
        assert session.work_dir == tmp_path / "mine"
    forget_mirrors(session.work_dir)  # a local folder: nothing to forget
    assert session.work_dir.is_dir()


@pytest.mark.integration
def test_a_url_work_folder_is_leased_and_its_mirror_forgotten_when_the_block_ends(tmp_path):
    with s3_server("sessions"):
        fs = s3_filesystem()
        with work_session("s3://sessions/work/", tmp_path / "out", "0123abcd") as session:
            assert workstore.is_mirrored(session.work_dir) and session.work_dir.is_dir()
            assert fs.exists("sessions/work/.lock")
            session.still_held()  # the lease is this build's
        assert not fs.exists("sessions/work/.lock") and not session.work_dir.exists()


def test_a_warning_goes_to_the_terminal_outside_a_flow_run(capsys):
    tell("work folder busy")
    assert capsys.readouterr().err == "warning: work folder busy\n"
