"""The model stages with the work folder on S3 (moto's server on 127.0.0.1): region proposals with random-weight
GroundingDINO and SAM, and VLM-written grounded questions from a replaying OpenAI-compatible server. A build on
the URL, and a rerun from an emptied mirror (as on another machine), give the local build's release byte for byte."""

import json
from pathlib import Path
from typing import Callable

import pytest

from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from reasonvqa.flows.config import BuildConfig
from tests.flows.test_build_grounded import REPLIES, vlm_config, write_vlm_inputs
from tests.moto_s3 import forget_mirror, s3_filesystem, s3_server
from tests.tasks.verify.llm_server import FixtureLLM

pytestmark = pytest.mark.integration


def files(release: Path) -> dict[str, bytes]:
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()}


def builds_on_url(config: Callable[[], BuildConfig], root: Path, work: str, monkeypatch) -> list[dict[str, bytes]]:
    """The release files of a build on ``work`` and of a rerun on it from an emptied mirror."""
    on_url = build_reasonvqa(config(), str(root / "url"), work)
    forget_mirror(monkeypatch)
    again = build_reasonvqa(config(), str(root / "again"), work)
    return [files(Path(p)) for p in (on_url, again)]


def markers(stage: str, root: str) -> list[str]:
    fs = s3_filesystem()
    return sorted(Path(p).name for p in fs.find(f"{root}/{stage}/_done"))


def test_region_proposals_on_a_url_work_folder(tmp_path, monkeypatch, proposals_build):
    config, local_release = proposals_build  # the local build: the session's (tests/flows/conftest.py)
    local = files(local_release)
    with s3_server("proposals"):
        on_url, again = builds_on_url(config, tmp_path, "s3://proposals/work", monkeypatch)
        done = markers("proposals", "proposals/work")
    assert json.loads(local["stats/stages.json"])["proposals"]["rows_out"] > 0  # the models' regions
    assert on_url == local and again == local
    assert done and all(m.startswith("part-") for m in done)


def test_grounded_vlm_questions_on_a_url_work_folder(tmp_path, monkeypatch):
    write_vlm_inputs(tmp_path)
    with s3_server("vlm"), FixtureLLM(generations=REPLIES) as server:
        config = lambda: vlm_config(tmp_path, server.base_url)  # noqa: E731
        local = files(Path(build_reasonvqa(config(), str(tmp_path / "local"))))
        on_url, again = builds_on_url(config, tmp_path, "s3://vlm/work", monkeypatch)
        done = markers("grounded_vlm", "vlm/work")
    assert json.loads(local["stats/stages.json"])["grounded_vlm"]["rows_out"] == 10
    assert on_url == local and again == local
    assert len(done) > 0
