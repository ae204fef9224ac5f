"""Every flow test runs against the session's temporary Prefect API (``prefect_api`` in tests/conftest.py)."""

from pathlib import Path

import pytest

from tests.prefect_harness import prefect_environment

prefect_environment()  # at collection, before the flow modules import Prefect


@pytest.fixture(scope="session", autouse=True)
def _flows_use_the_prefect_api(prefect_api):
    yield


@pytest.fixture(scope="session")
def proposals_build(run_folder):
    """``(config, release)``: a ``config()`` of the sample with region proposals by random-weight GroundingDINO
    and SAM over noise pictures (tests/flows/test_build_proposals.py), and its release built once per test
    run with a local work folder, shared by every worker (the first builds it under a file lock). Read it only."""
    pytest.importorskip("torch")
    pytest.importorskip("groundingdino")
    pytest.importorskip("segment_anything")
    from reasonvqa.flows.build_reasonvqa import build_reasonvqa
    from reasonvqa.flows.config import sample_config
    from reasonvqa.tasks.proposals.config import ProposalsConfig
    from tests.flows.test_build_proposals import first_vg_images, write_sample_images
    from reasonvqa.tasks.proposals.random_models import SMALL_INPUT_SAM, register_tiny_sam, tiny_proposals_config
    from tests.tool_cache import locked

    root = run_folder / "proposals-build"
    register_tiny_sam()  # segment-anything's registry, in this process

    def config():
        built = first_vg_images(sample_config())
        built.proposals = ProposalsConfig.model_validate_json((root / "proposals.json").read_text())
        return built

    with locked(run_folder / "proposals-build.lock"):
        if not (root / "release.path").exists():
            write_sample_images(root / "vg_images")
            proposals = tiny_proposals_config(root / "models", image_roots={"vg": root / "vg_images"}, sam=SMALL_INPUT_SAM)
            (root / "proposals.json").write_text(proposals.model_dump_json())
            (root / "release.path").write_text(str(build_reasonvqa(config(), str(root / "out"))))
    return config, Path((root / "release.path").read_text())
