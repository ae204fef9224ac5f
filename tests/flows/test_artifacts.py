import base64

import pyarrow as pa
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

from reasonvqa.flows.artifacts import publish_artifacts, release_summary_markdown
from reasonvqa import schemas
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.release.conftest import question

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def _release(tmp_path):
    stats = tmp_path / "stats"
    stats.mkdir()
    (stats / "plot.png").write_bytes(PNG)
    (stats / "SUMMARY.md").write_text("# Release statistics\n\n- [plot.png](plot.png)\n- [stats.json](stats.json)\n")
    train = schemas.from_rows([question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"])], schemas.QUESTIONS)
    test = schemas.from_rows([question("q2", "vg:2", "Rome", ["Rome", "Bern", "Oslo", "Kyiv"])], schemas.QUESTIONS)
    return write_release(tmp_path / "out", "demo-set", "1.0.0", {"train": train, "test": test},
                         pool=pa.concat_tables([train, test]), stats_dir=stats, config={}, inputs={})


def test_summary_embeds_png_plots_and_names_other_files(tmp_path):
    text = release_summary_markdown(_release(tmp_path))
    assert text.startswith("# demo-set 1.0.0")
    assert f"![plot.png](data:image/png;base64,{base64.b64encode(PNG).decode()})" in text
    assert "stats.json (`" in text


def test_artifacts_reach_the_prefect_api(tmp_path):
    release = _release(tmp_path)

    @flow
    def publish():
        publish_artifacts(release)

    publish()
    with get_client(sync_client=True) as client:
        keys = {a.key: a for a in client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["demo-set-counts", "demo-set-stats"])))}
    assert set(keys) == {"demo-set-counts", "demo-set-stats"}
    assert "data:image/png;base64," in keys["demo-set-stats"].data
