"""A source defined in this module alone (no edit anywhere else) is scanned and built.

``ToySource`` reads a folder of JSON-lines files, one work unit per file; it registers with
``reasonvqa.sources.register`` and is then used by ``reasonvqa sources scan`` (through the
CLI) and by a real build-reasonvqa flow run that mixes it with the bundled Visual Genome sample.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import polars as pl
import pytest
from typer.testing import CliRunner

from reasonvqa import schemas, sources
from reasonvqa.flows.build_reasonvqa import build_reasonvqa, stage_report
from reasonvqa.flows.cli import app
from reasonvqa.flows.config import load_config
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.stage import Rejects, StageResult, stage_stats
from reasonvqa.tasks.release.verify import verify_release


class ToyConfig(sources.SourceConfig):
    pattern: str = "*.jsonl"


class ToySource(sources.Source):
    """``<folder>/<pattern>``: one JSON object per line, ``{"id", "width", "height", "objects": [{"name", "synset"}]}``."""

    kind = "toy"
    config_model = ToyConfig
    visual_domain = "indoor"
    license = "CC0 1.0"
    description = "JSON lines of images with named objects (a test source)"

    def check(self, config: ToyConfig) -> None:
        folder = sources.require_folder(config)
        if not any(folder.glob(config.pattern)):
            raise FileNotFoundError(f"no {config.pattern} files in {folder}")

    def plan(self, config: ToyConfig, shard_size: int) -> list[Any]:
        return sorted(p.name for p in Path(config.path).glob(config.pattern))

    def read(self, config: ToyConfig, unit: Any, shard_size: int) -> Iterator[StageResult]:
        lines = (Path(config.path) / unit).read_text(encoding="utf-8").splitlines()
        for shard, start in enumerate(range(0, max(len(lines), 1), shard_size)):
            rejects, images, objects = Rejects("sources_toy", shard), [], []
            for number, line in enumerate(lines[start : start + shard_size], start=start + 1):
                try:
                    record = json.loads(line)
                    image_id = f"toy:{record['id']}"
                except (json.JSONDecodeError, KeyError, TypeError):
                    rejects.add("toy_line_malformed", f"{unit}:{number}", line)
                    continue
                images.append({"image_id": image_id, "source": self.kind, "source_image_id": str(record["id"]),
                               "width": record["width"], "height": record["height"]})
                objects += [{"object_id": f"{image_id}/o{k}", "image_id": image_id, "label": o["name"], "names": [o["name"]],
                             "synset": o["synset"], "synsets": [o["synset"]], "origin": "annotation:toy"}
                            for k, o in enumerate(record["objects"])]
            yield StageResult(outputs={"images": schemas.from_rows(images, schemas.IMAGES),
                                       "objects": schemas.from_rows(objects, schemas.OBJECTS)},
                              rejects=rejects, rows_in=len(lines[start : start + shard_size]), rows_out=len(images))


def _image(image_id: str, *synsets: str) -> str:
    objects = [{"name": s.split(".")[0], "synset": s} for s in synsets]
    return json.dumps({"id": image_id, "width": 640, "height": 480, "objects": objects})


@pytest.fixture(scope="module")
def toy_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("toy")
    # telephones and teddy bears: items with facts in the bundled knowledge sample
    (folder / "a.jsonl").write_text("\n".join([_image("a1", "telephone.n.01", "clock.n.01"), "{not json",
                                               _image("a2", "teddy.n.01")]) + "\n")
    (folder / "b.jsonl").write_text(_image("b1", "telephone.n.01", "tree.n.01") + "\n")
    (folder / "notes.txt").write_text("not read")
    return folder


@pytest.fixture(scope="module", autouse=True)
def toy_registered():
    sources.register(ToySource)
    yield
    sources.unregister("toy")


runner = CliRunner()


def test_the_registry_and_the_cli_help_know_the_toy_source():
    assert {"toy", "vg", "gldv2"} <= set(sources.kinds())
    assert isinstance(sources.get("toy"), ToySource)
    result = runner.invoke(app, ["sources", "scan", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "gldv2" in result.output and "toy" in result.output and "vg" in result.output


def test_sources_scan_reads_the_toy_source_through_the_cli(toy_folder):
    result = runner.invoke(app, ["sources", "scan", "--source", "toy", "--path", str(toy_folder)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    # units a.jsonl (3 lines, shard_size 5000: one shard) and b.jsonl (one shard)
    assert summary == {"source": "toy", "path": str(toy_folder), "images": 3, "objects": 5, "relations": 0,
                       "attributes": 0, "regions": 0, "rejected": {"toy_line_malformed": 1}, "shards": 2}


def test_scan_of_an_unknown_kind_lists_the_known_ones(tmp_path):
    result = runner.invoke(app, ["sources", "scan", "--source", "coco", "--path", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown source kind 'coco'; known kinds:" in result.output and "toy" in result.output


def test_the_config_validates_and_serializes_the_toy_source_with_its_own_model(tmp_path):
    (tmp_path / "build.yaml").write_text("sources:\n  - {kind: toy, path: toy, pattern: '*.json'}\n")
    config = load_config(tmp_path / "build.yaml")
    assert isinstance(config.sources[0], ToyConfig) and config.sources[0].path == tmp_path / "toy"
    assert config.model_dump()["sources"][0]["pattern"] == "*.json"
    (tmp_path / "bad.yaml").write_text("sources:\n  - {kind: toy, path: toy, patern: x}\n")
    with pytest.raises(ValueError, match="patern"):
        load_config(tmp_path / "bad.yaml")


@pytest.fixture(scope="module")
def mixed_build(toy_folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    (root / "build.yaml").write_text(
        # the sample's first 5 VG images (it holds 50): the test is about the toy source's units and shards
        f"sources:\n  - {{kind: vg, path: {SAMPLE_DIR / 'vg'}, max_images: 5}}\n  - {{kind: toy, path: {toy_folder}}}\n"
        "release: {name: mixed, version: 1.0.0}\nshard_size: 2\n"
        # a pool of a dozen questions: keep every hop and every pair so both splits hold some
        "balance: {hop_shares: null}\nsplit: {drop_test_pairs_seen_in_train: false}\n"
    )
    release = Path(build_reasonvqa(load_config(root / "build.yaml"), str(root / "out")))
    return release, next((root / "out" / ".work").iterdir())


def test_a_build_reads_every_unit_of_the_toy_source(mixed_build):
    release, work = mixed_build
    assert verify_release(release) == []
    manifest = json.loads((release / "manifest.json").read_text())
    assert set(manifest["inputs"]) == {"source:vg", "source:toy", "knowledge", "knowledge_date", "knowledge_content",
                                       "grounded_rules"}
    # VG: its first 5 images in shards of 2 -> 3 shards; toy: a.jsonl -> 2 shards (3 lines), b.jsonl -> 1 shard
    shards = json.loads((work / "shards.json").read_text())
    assert [(s["number"], s["source"], s["unit"], s["shard"]) for s in shards] == [
        (0, "vg", 0, 0), (1, "vg", 0, 1), (2, "vg", 0, 2), (3, "toy", 0, 0), (4, "toy", 0, 1), (5, "toy", 1, 0)]
    report = stage_report(work)
    assert report["sources_toy"]["rows_in"] == 4 and report["sources_toy"]["rejected"] == {"toy_line_malformed": 1}
    for unit in sorted((work / "sources_toy").iterdir()):
        for shard in stage_stats(unit):
            assert shard["rows_in"] == shard["rows_out"] + sum(shard["rejected"].values())
    images = pl.read_parquet(work / "sources_toy" / "*" / "images" / "*.parquet")
    assert sorted(images["image_id"]) == ["toy:a1", "toy:a2", "toy:b1"]
    assert set(images["visual_domain"]) == {"indoor"} and set(images["license"]) == {"CC0 1.0"}
    links = pl.read_parquet(work / "link" / "entity_links" / "*.parquet")
    assert {"toy:a1", "toy:a2", "toy:b1"} <= set(links["image_id"])
    # link rejects name the source shard's objects file
    link_rejects = pl.read_parquet(work / "link" / "_rejects" / "*.parquet")
    assert link_rejects.height and link_rejects["source"].str.contains(
        r"^sources_(vg|toy)/unit-0000[01]/objects/part-0000[0-2]\.parquet#").all()
    # links and questions of a source shard are written under its number
    toy_b1 = pl.read_parquet(work / "link" / "entity_links" / "part-00005.parquet")
    assert set(toy_b1["image_id"]) == {"toy:b1"}


def test_the_release_holds_questions_about_toy_images(mixed_build):
    release, work = mixed_build
    questions = pl.concat([pl.read_parquet(release / s / "*.parquet") for s in ("train", "test")])
    assert {"vg", "toy"} == set(questions["image_source"])
    assert {"toy:a1", "toy:a2", "toy:b1"} <= set(questions["image_id"])
    assert set(pl.read_parquet(work / "questions" / "questions" / "part-00005.parquet")["image_id"]) == {"toy:b1"}
