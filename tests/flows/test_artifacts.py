import base64
import json

import pyarrow as pa
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

from reasonvqa.flows.artifacts import counts_rows, publish_artifacts, release_summary_markdown
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


def test_summary_links_plots_by_file_uri_and_embeds_no_image(tmp_path):
    release = _release(tmp_path)
    text = release_summary_markdown(release)
    assert text.startswith("# demo-set 1.0.0")
    assert f"[plot.png]({(release / 'stats' / 'plot.png').resolve().as_uri()})" in text
    assert f"[stats.json]({(release / 'stats' / 'stats.json').resolve().as_uri()})" in text
    assert "base64" not in text and len(text.encode()) < 1_000


def test_counts_rows_say_what_each_folder_counts():
    manifest = {"splits": ["train", "test"], "counts": {"images": 20, "pool": 853, "regions": 195, "test": 47, "train": 177}}
    assert counts_rows(manifest) == [
        {"folder": "train", "counts": "questions", "rows": 177}, {"folder": "test", "counts": "questions", "rows": 47},
        {"folder": "pool", "counts": "questions", "rows": 853}, {"folder": "images", "counts": "images", "rows": 20},
        {"folder": "regions", "counts": "regions", "rows": 195}]


def test_each_flow_publishes_under_its_own_keys(tmp_path):
    release = _release(tmp_path)

    @flow
    def publish():
        publish_artifacts(release, "build")
        publish_artifacts(release, "resplit")

    publish()
    keys = ["build-demo-set-counts", "build-demo-set-stats", "resplit-demo-set-counts", "resplit-demo-set-stats"]
    with get_client(sync_client=True) as client:
        found = {a.key: a for a in client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))}
    assert sorted(found) == keys
    assert json.loads(found["resplit-demo-set-counts"].data) == [
        {"folder": "train", "counts": "questions", "rows": 1}, {"folder": "test", "counts": "questions", "rows": 1},
        {"folder": "pool", "counts": "questions", "rows": 2}]
    assert "(resplit)" in found["resplit-demo-set-counts"].description
    assert "plot.png" in found["build-demo-set-stats"].data and "base64" not in found["build-demo-set-stats"].data
