"""The rehearsal's generated inputs (reasonvqa/rehearsal_inputs.py) at a tiny scale: the real readers accept them
(Visual Genome and GLDv2 sources, the entity-dump reader), their counts match the generator's, every linked thing
has its item, and the files are written once per parameters and byte-identical for a seed."""

from __future__ import annotations

import gzip
import hashlib
import re

import pyarrow.parquet as pq
import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.entity_dump import read_entities
from reasonvqa.rehearsal_inputs import MARKER, RELEASE_NAME, make_rehearsal_inputs
from reasonvqa.sources import get, parse_config
from reasonvqa.stage import shard_paths

from tests.tasks.sources.source_runner import run_source

SCALE = 0.0005  # 54 Visual Genome images, 245 GLDv2 images over 10 landmarks


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_rehearsal_inputs(tmp_path_factory.mktemp("rehearsal"), SCALE)


def _rows(stage, table):
    return [row for path in shard_paths(stage, table) for row in pq.read_table(path).to_pylist()]


def test_visual_genome_reader_takes_the_files_and_counts_match(inputs, tmp_path):
    stage = tmp_path / "vg"
    stats = run_source(get("vg"), parse_config({"kind": "vg", "path": inputs.folder / "vg"}), stage)
    counts = inputs.counts
    images, objects = _rows(stage, "images"), _rows(stage, "objects")
    assert counts.vg_images == 54 and len(images) == 54
    assert all(i["width"] in (800, 500) and i["height"] in (600, 375) for i in images)
    assert len(objects) == counts.vg_objects and 25 <= counts.vg_objects / counts.vg_images <= 45
    relations = len(_rows(stage, "relations"))
    rejected = sum(sum(s["rejected"].values()) for s in stats)
    # every relationship is kept or rejected with a reason (duplicates of a subject, predicate, object)
    assert relations + sum(s["rejected"].get("duplicate_relation", 0) for s in stats) == counts.vg_relationships
    assert 15 <= counts.vg_relationships / counts.vg_images <= 27
    assert sum(s["rows_in"] for s in stats) == sum(s["rows_out"] for s in stats) + rejected
    synsets = [o["synset"] for o in objects if o["synset"]]
    assert 0.9 < len(synsets) / len(objects) < 0.99 and all(s.count(".") == 2 for s in synsets)


def test_gldv2_reader_takes_the_csvs_and_every_landmark_has_its_item(inputs, tmp_path):
    stage = tmp_path / "gldv2"
    stats = run_source(get("gldv2"), parse_config({"kind": "gldv2", "path": inputs.folder / "gldv2"}), stage)
    images, objects = _rows(stage, "images"), _rows(stage, "objects")
    assert inputs.counts.gld_images == 245 and len(images) == 245 and sum(s["rows_out"] for s in stats) == 245
    assert all(s["rejected"] == {} for s in stats)
    categories = {o["commons_category"] for o in objects}
    assert len(categories) == inputs.counts.gld_landmarks == 10
    assert 0.3 < sum(bool(i["is_clean"]) for i in images) / len(images) < 0.5
    read = read_entities(inputs.folder / "entities")
    sitelinks = {e["sitelinks"]["commonswiki"]["title"] for e in read.entities.values() if e["sitelinks"]}
    assert {f"Category:{c}" for c in categories} == sitelinks


def test_the_dump_reads_without_problems_and_every_concept_links(inputs):
    read = read_entities(inputs.folder / "entities")
    assert read.problems == [] and len(read.entities) == inputs.counts.entities
    assert sum(len(s) for e in read.entities.values() for s in e["claims"].values()) == inputs.counts.statements
    by_wn31 = {s["mainsnak"]["datavalue"]["value"] for e in read.entities.values() for s in e["claims"].get("P8814", [])}
    assert len(by_wn31) == inputs.counts.concept_items
    table, wn31_of_30 = {}, {}
    with gzip.open(KnowledgeConfig().wordnet_table, "rt", encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            name, wn30, _ili, wn31, hypernyms = (line.rstrip("\n").split("\t") + [""])[:5]
            table[name] = (wn31, hypernyms.split(" ")[0] if hypernyms else "")
            wn31_of_30[wn30] = wn31
    objects = (inputs.folder / "vg" / "objects.json").read_text()
    used = set(re.findall(r'"synsets":\["([^"]+)"\]', objects))
    for synset in used:  # directly, or through the first hypernym at depth 1
        wn31, hyper30 = table[synset]
        assert wn31 in by_wn31 or wn31_of_30.get(hyper30) in by_wn31, synset
    # three hops: a landmark's city (hop 2) has a country (hop 3), whose capital is an item of the dump
    landmark = next(e for e in read.entities.values() if e["sitelinks"] and "P131" in e["claims"])
    city = read.entities[landmark["claims"]["P131"][0]["mainsnak"]["datavalue"]["value"]["id"]]
    country = read.entities[city["claims"]["P17"][0]["mainsnak"]["datavalue"]["value"]["id"]]
    assert country["claims"]["P36"][0]["mainsnak"]["datavalue"]["value"]["id"] in read.entities


def test_written_once_per_parameters_and_the_same_bytes_for_a_seed(inputs, tmp_path):
    marker = inputs.folder / MARKER
    before = marker.stat().st_mtime_ns
    again = make_rehearsal_inputs(inputs.folder, SCALE)
    assert again.counts == inputs.counts and marker.stat().st_mtime_ns == before
    other = make_rehearsal_inputs(tmp_path / "copy", SCALE)

    def digest(folder):
        return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(folder.rglob("*")) if p.is_file()}

    assert digest(other.folder) == digest(inputs.folder)
    assert f"name: {RELEASE_NAME}" in inputs.config.read_text() and "synthetic" in RELEASE_NAME
    changed = make_rehearsal_inputs(tmp_path / "copy", SCALE * 2, seed=1)  # other parameters: written again
    assert changed.counts.vg_images == 108 and digest(changed.folder) != digest(inputs.folder)
