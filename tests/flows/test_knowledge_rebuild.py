"""A release carries its knowledge: rebuilt from it, offline, it is the same release, byte for byte."""

import json
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from reasonvqa.flows.cli import app
from reasonvqa.flows.config import sample_config
from reasonvqa.flows.resplit import resplit
from reasonvqa.knowledge import mirror
from reasonvqa.knowledge.mirror import serve_mirror
from reasonvqa.knowledge.wikidata import WikidataClient
from reasonvqa.tasks.release.verify import verify_release

pytestmark = pytest.mark.integration


def _files(release: Path) -> dict[str, bytes]:
    return {p.relative_to(release).as_posix(): p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()}


@pytest.fixture
def offline(monkeypatch):
    """Any SPARQL request, mirror start or mirror store build fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a rebuild from a release's knowledge queried an endpoint or the mirror")

    monkeypatch.setattr(WikidataClient, "select", refuse)
    monkeypatch.setattr(mirror, "serve_mirror", refuse)
    monkeypatch.setattr(mirror, "build_store", refuse)


def test_the_sample_release_carries_its_knowledge(sample_release):
    manifest = json.loads((sample_release / "manifest.json").read_text())
    assert manifest["tables"] == ["entity_links", "images", "knowledge", "knowledge_queries", "regions"]
    assert {"knowledge/part-00000.parquet", "knowledge_queries/part-00000.parquet",
            "entity_links/part-00000.parquet"} <= set(manifest["files"])
    facts = pq.read_table(sample_release / "knowledge" / "part-00000.parquet")
    assert facts.num_rows == manifest["counts"]["knowledge"] == 301  # the facts stage's rows out (stats/stages.json)
    assert set(facts["fetched_on"].to_pylist()) == {"2021-05-26"} == {manifest["inputs"]["knowledge_date"]}
    assert set(facts["fetched_from"].to_pylist()) == {f"oxigraph-mirror:{manifest['inputs']['knowledge']}"}
    card = (sample_release / "README.md").read_text()
    assert "Wikidata knowledge as of **2021-05-26**" in card
    assert "reasonvqa build --knowledge-from <this folder> --out <folder>" in card


def test_the_sample_rebuilt_from_its_own_knowledge_offline_is_byte_identical(sample_release, tmp_path, offline):
    # the CLI with no --config: the release's own config
    result = CliRunner().invoke(app, ["build", "--knowledge-from", str(sample_release), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    again = tmp_path / "again" / sample_release.parent.name / sample_release.name
    assert _files(again) == _files(sample_release)
    work = next((tmp_path / "again" / ".work").iterdir())
    assert not (work / "mirror").exists() and not (work / "_sparql_cache").exists()


def test_a_resplit_carries_the_knowledge_and_rebuilds_its_source(sample_release, tmp_path, offline):
    split = resplit(sample_release, tmp_path / "resplit", hops=[1])
    assert verify_release(split) == []
    for table in ("knowledge", "knowledge_queries"):
        assert (split / table / "part-00000.parquet").read_bytes() == \
            (sample_release / table / "part-00000.parquet").read_bytes()
    links = pq.read_table(split / "entity_links" / "part-00000.parquet")
    pool_images = set(pq.read_table(split / "pool", columns=["image_id"])["image_id"].to_pylist())
    assert set(links["image_id"].to_pylist()) <= pool_images
    assert "reasonvqa build --knowledge-from <this folder> --config <source config>" in (split / "README.md").read_text()
    rebuilt = Path(build_reasonvqa(sample_config(), str(tmp_path / "source"), knowledge_from=str(split)))
    assert _files(rebuilt) == _files(sample_release)


def test_a_build_against_an_endpoint_rebuilds_after_the_endpoint_is_stopped(tmp_path):
    config = sample_config()
    with serve_mirror(config.knowledge.mirror_entities, tmp_path / "mirror") as endpoint:
        config.knowledge.endpoint = endpoint  # a real oxigraph serve-read-only on 127.0.0.1, a free port
        first = Path(build_reasonvqa(config, str(tmp_path / "a")))
    with pytest.raises(urllib.error.URLError):  # stopped: nothing answers there any more
        urllib.request.urlopen(endpoint + "?query=ASK%7B%7D", timeout=5)
    facts = pq.read_table(first / "knowledge" / "part-00000.parquet")
    assert set(facts["fetched_from"].to_pylist()) == {endpoint}
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["inputs"]["knowledge"].startswith(f"endpoint:{endpoint}@")

    again = Path(build_reasonvqa(config, str(tmp_path / "b"), knowledge_from=str(first)))
    assert _files(again) == _files(first)
    assert verify_release(again) == []


def test_a_tampered_release_is_refused_in_one_line_before_any_work(sample_release, tmp_path):
    import shutil

    old = tmp_path / "old" / "reasonvqa-sample" / "0.1.0"
    shutil.copytree(sample_release, old)
    (old / "knowledge" / "part-00000.parquet").write_bytes(b"not parquet")
    result = CliRunner().invoke(app, ["build", "--knowledge-from", str(old), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(f"error: {old}: fails verification (")
