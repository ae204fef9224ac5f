"""Reading entities in each shape of the Wikidata JSON dump format."""

from __future__ import annotations

import bz2
import gzip
import json

import pytest

from reasonvqa.knowledge.entity_dump import entity_files, read_entities
from tests.knowledge.helpers import item_entity, statement, write_jsonl

DOG = item_entity("Q144", "dog", {"P8814": [statement("Q144", "P8814", "02086723-n")]})
CAR = item_entity("Q1420", "car", {"P279": [statement("Q1420", "P279", "Q752870")]})


def test_json_lines(tmp_path):
    read = read_entities(write_jsonl(tmp_path / "e.jsonl", [DOG, CAR]))
    assert sorted(read.entities) == ["Q1420", "Q144"]
    assert read.entities["Q144"]["labels"]["en"]["value"] == "dog"
    assert read.problems == []


def test_full_dump_array_one_entity_per_line(tmp_path):
    # dumps.wikimedia.org layout: "[" line, entities ending with ",", "]" line; gzip-compressed
    text = "[\n" + json.dumps(DOG) + ",\n" + json.dumps(CAR) + "\n]\n"
    path = tmp_path / "latest-all.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    read = read_entities(path)
    assert sorted(read.entities) == ["Q1420", "Q144"] and read.problems == []


def test_small_pretty_printed_array(tmp_path):
    path = tmp_path / "few.json"
    path.write_text(json.dumps([DOG, CAR], indent=2))
    assert sorted(read_entities(path).entities) == ["Q1420", "Q144"]


def test_special_entitydata_answer(tmp_path):
    path = tmp_path / "Q144.json"
    path.write_text(json.dumps({"entities": {"Q144": DOG, "Q999999999": {"id": "Q999999999", "missing": ""}}}))
    read = read_entities(path)
    assert list(read.entities) == ["Q144"]
    assert [(p.source, p.reason) for p in read.problems] == [("Q144.json#entities.Q999999999", "missing entity")]


def test_bz2_and_folder_in_name_order(tmp_path):
    (tmp_path / "b.jsonl.bz2").write_bytes(bz2.compress((json.dumps(CAR) + "\n").encode()))
    write_jsonl(tmp_path / "a.jsonl", [DOG])
    (tmp_path / "notes.txt").write_text("not an entity file")
    assert [p.name for p in entity_files(tmp_path)] == ["a.jsonl", "b.jsonl.bz2"]
    assert sorted(read_entities(tmp_path).entities) == ["Q1420", "Q144"]


def test_bad_lines_are_reported_with_file_and_line_and_skipped(tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text(json.dumps(DOG) + "\n{not json\n" + json.dumps({"id": "Q12 }", "claims": {}}) + "\n[1,2]\n" + json.dumps(CAR) + "\n")
    read = read_entities(path)
    assert sorted(read.entities) == ["Q1420", "Q144"]
    assert [p.source for p in read.problems] == ["e.jsonl:2", "e.jsonl:3", "e.jsonl:4"]
    assert "malformed JSON" in read.problems[0].reason
    assert "not Q<digits>" in read.problems[1].reason


def test_same_entity_in_two_files_is_merged(tmp_path):
    labelled = item_entity("Q144", "dog", {"P279": [statement("Q144", "P279", "Q39201")]})
    write_jsonl(tmp_path / "a.jsonl", [DOG])
    write_jsonl(tmp_path / "b.jsonl", [labelled, DOG])  # DOG again: its statement is not doubled
    entity = read_entities(tmp_path).entities["Q144"]
    assert sorted(entity["claims"]) == ["P279", "P8814"]
    assert len(entity["claims"]["P8814"]) == 1


def test_missing_input_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_entities(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no entity files"):
        read_entities(tmp_path / "empty")
