"""The model stages with the work folder on S3 (moto's server on 127.0.0.1): region proposals with random-weight
GroundingDINO and SAM, and VLM-written grounded questions from a replaying OpenAI-compatible server. A build on
the URL, and a rerun from an emptied mirror (as on another machine), give the local build's release byte for byte."""

import json
from pathlib import Path
from typing import Callable

import pytest

from reasonvqa.config import BuildConfig, sample_config
from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from tests.flows.test_build_grounded import REPLIES, vlm_config, write_vlm_inputs
from tests.moto_s3 import forget_mirror, s3_filesystem, s3_server
from tests.tasks.verify.llm_server import FixtureLLM

pytestmark = pytest.mark.integration


def files(release: Path) -> dict[str, bytes]:
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()}


def three_builds(config: Callable[[], BuildConfig], root: Path, work: str, monkeypatch) -> list[dict[str, bytes]]:
    """The release files of a local build, a build on ``work`` and a rerun on it from an emptied mirror."""
    local = build_reasonvqa(config(), str(root / "local"))
    on_url = build_reasonvqa(config(), str(root / "url"), work)
    forget_mirror(monkeypatch)
    again = build_reasonvqa(config(), str(root / "again"), work)
    return [files(Path(p)) for p in (local, on_url, again)]


def markers(stage: str, root: str) -> list[str]:
    fs = s3_filesystem()
    return sorted(Path(p).name for p in fs.find(f"{root}/{stage}/_done"))


def test_region_proposals_on_a_url_work_folder(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("groundingdino")
    pytest.importorskip("segment_anything")
    from tests.flows.test_build_proposals import first_vg_images, write_sample_images
    from tests.tasks.proposals.test_stage import tiny_proposals_config
    from tests.tasks.proposals.tiny_models import register_tiny_sam

    register_tiny_sam()
    write_sample_images(tmp_path / "vg_images")
    proposals = tiny_proposals_config(tmp_path / "models", image_roots={"vg": tmp_path / "vg_images"})

    def config() -> BuildConfig:
        built = first_vg_images(sample_config())
        built.proposals = proposals
        return built

    with s3_server("proposals"):
        local, on_url, again = three_builds(config, tmp_path, "s3://proposals/work", monkeypatch)
        done = markers("proposals", "proposals/work")
    assert json.loads(local["stats/stages.json"])["proposals"]["rows_out"] > 0  # the models' regions
    assert on_url == local and again == local
    assert done and all(m.startswith("part-") for m in done)


def test_grounded_vlm_questions_on_a_url_work_folder(tmp_path, monkeypatch):
    write_vlm_inputs(tmp_path)
    with s3_server("vlm"), FixtureLLM(generations=REPLIES) as server:
        local, on_url, again = three_builds(lambda: vlm_config(tmp_path, server.base_url), tmp_path,
                                            "s3://vlm/work", monkeypatch)
        done = markers("grounded_vlm", "vlm/work")
    assert json.loads(local["stats/stages.json"])["grounded_vlm"]["rows_out"] == 10
    assert on_url == local and again == local
    assert len(done) > 0
