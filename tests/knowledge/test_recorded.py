"""Recorded SPARQL answers: linking and facts replayed from them give the same tables, offline."""

from __future__ import annotations

import json

import pytest

from reasonvqa import schemas
from reasonvqa.knowledge import queries
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.facts import fetch_facts
from reasonvqa.knowledge.linking import link_objects
from reasonvqa.knowledge.recorded import (
    KnowledgeNotRecorded, RecordingClient, ReplayClient, canonical_answer, merge_answers, replay_client,
    with_answers, write_replay_file,
)
from reasonvqa.knowledge.wordnet import TableWordNet

CONFIG = KnowledgeConfig(wordnet_source="table", batch_size=3)


def _objects():
    rows = [
        {"object_id": "vg:1/o0", "image_id": "vg:1", "label": "car", "synset": "car.n.01"},
        {"object_id": "vg:1/o1", "image_id": "vg:1", "label": "guy", "synset": "guy.n.01"},  # through man.n.01
        {"object_id": "vg:1/o2", "image_id": "vg:1", "label": "area", "synset": "area.n.01"},  # no item
        {"object_id": "gldv2:cb/o0", "image_id": "gldv2:cb", "commons_category": "Mount Everest"},
        {"object_id": "gldv2:59/o0", "image_id": "gldv2:59", "commons_category": "Eiffel_Tower"},
    ]
    return schemas.from_rows([{"origin": "annotation", **r} for r in rows], schemas.OBJECTS)


def test_canonical_answer_sorts_rows_and_keys():
    rows = [{"b": {"type": "literal", "value": "2"}, "a": {"value": "x", "type": "uri"}},
            {"a": {"type": "uri", "value": "w"}}]
    assert canonical_answer(rows) == ('[{"a":{"type":"uri","value":"w"}},'
                                      '{"a":{"type":"uri","value":"x"},"b":{"type":"literal","value":"2"}}]')
    assert canonical_answer(list(reversed(rows))) == canonical_answer(rows)


def test_linking_and_facts_replayed_from_their_recorded_answers_are_the_same(bundled_client, tmp_path):
    wordnet = TableWordNet(CONFIG.wordnet_table)
    recorder = RecordingClient(bundled_client)
    links = with_answers(link_objects(_objects(), recorder, CONFIG, 0, wordnet=wordnet), recorder)
    qids = sorted(set(links.outputs["entity_links"]["qid"].to_pylist()))
    fact_recorder = RecordingClient(bundled_client)
    facts = with_answers(fetch_facts(qids, fact_recorder, CONFIG, ["P17", "P36", "P2044", "P31"], 0), fact_recorder)
    assert links.rows_out == 4 and links.outputs["entity_links"].num_rows == 4  # the answers are not rows out
    assert facts.outputs["facts"].num_rows > 10

    answers = merge_answers([links.outputs["knowledge_queries"], facts.outputs["knowledge_queries"]])
    assert answers["query"].to_pylist() == sorted(set(answers["query"].to_pylist()))
    assert answers.num_rows == len(recorder.answers) + len(fact_recorder.answers)  # no query asked twice here
    replay = replay_client(write_replay_file(answers, tmp_path / "answers.parquet"))
    again = link_objects(_objects(), replay, CONFIG, 0, wordnet=wordnet)
    assert again.outputs["entity_links"].equals(links.outputs["entity_links"])
    assert again.rejects.reason_counts() == links.rejects.reason_counts() == {"no_wikidata_item": 1}
    refetched = fetch_facts(qids, replay, CONFIG, ["P17", "P36", "P2044", "P31"], 0)
    assert refetched.outputs["facts"].equals(facts.outputs["facts"])
    assert refetched.rows_in == facts.rows_in and replay.requests == 0


def test_a_query_the_release_holds_no_answer_to_fails_naming_it():
    replay = ReplayClient({queries.labels(["Q90"]): "[]"}, "release demo 1.0.0")
    assert replay.select(queries.labels(["Q90"])) == []
    with pytest.raises(KnowledgeNotRecorded, match=r"release demo 1.0.0: the release's knowledge holds no answer to "
                                                   r"the query 'SELECT \?item \?label WHERE \{' \(1 answers recorded\)"):
        replay.select(queries.labels(["Q64"]))


def test_merge_keeps_one_answer_per_query():
    import pyarrow as pa

    first = pa.table({"query": ["b", "a"], "answer": ["[]", json.dumps([{"x": {"type": "uri", "value": "1"}}])]})
    second = pa.table({"query": ["a", "c"], "answer": [json.dumps([{"x": {"type": "uri", "value": "1"}}]), "[]"]})
    merged = merge_answers([first, second])
    assert merged.schema == schemas.KNOWLEDGE_QUERIES
    assert merged["query"].to_pylist() == ["a", "b", "c"]
    assert merge_answers([]).num_rows == 0
