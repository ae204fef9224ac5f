"""Reading a release's knowledge back for a rebuild, and the knowledge table it is written as."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.endpoint import replay_endpoint
from reasonvqa.knowledge.recorded import replay_client
from reasonvqa.knowledge.release_knowledge import (
    fetched_from, knowledge_table, links_of_images, release_knowledge_tables, replay_file,
)
from reasonvqa.tasks.release.knowledge_source import ReleaseKnowledgeError, open_release_knowledge
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.release.conftest import question


def _release(tmp_path, tables=None, inputs=None):
    splits = {"train": schemas.from_rows([question("q1", "vg:1", "Paris", ["Paris", "Lyon", "Nice", "Lille"])],
                                         schemas.QUESTIONS),
              "test": schemas.from_rows([question("q2", "vg:2", "Rome", ["Rome", "Bern", "Oslo", "Riga"])],
                                        schemas.QUESTIONS)}
    return write_release(tmp_path, "demo", "1.0.0", splits, pool=pa.concat_tables(list(splits.values())),
                         stats_dir=None, config={}, inputs=inputs or {"knowledge": "sha256:ab", "knowledge_date": "2026-12-01"},
                         tables=tables)


def test_a_release_written_before_releases_carried_knowledge_is_refused(tmp_path):
    release = _release(tmp_path)
    with pytest.raises(ReleaseKnowledgeError, match=r"carries no knowledge to rebuild from \(no knowledge, "
                                                    r"knowledge_queries; releases written before 2026-12 hold none\)"):
        open_release_knowledge(release)
    with pytest.raises(ReleaseKnowledgeError, match="not a release folder"):
        open_release_knowledge(tmp_path)


def test_the_knowledge_of_a_release_is_its_inputs_and_recorded_answers(tmp_path):
    answers = pa.table({"query": ["SELECT 1", "SELECT 2"], "answer": ["[]", "[]"]}, schema=schemas.KNOWLEDGE_QUERIES)
    facts = schemas.from_rows([{"subject_qid": "Q142", "property_id": "P36", "hop": 1, "value_type": "item",
                                "value_qid": "Q90", "fetched_from": "oxigraph-mirror:sha256:ab",
                                "fetched_on": "2026-12-01"}], schemas.KNOWLEDGE)
    release = _release(tmp_path, {"knowledge": facts, "knowledge_queries": answers})
    found = open_release_knowledge(release)
    assert found.inputs == {"knowledge": "sha256:ab", "knowledge_date": "2026-12-01"}
    assert found.answers.equals(answers)
    assert len(found.answers_digest) == 64


def test_the_knowledge_table_is_the_facts_with_where_and_when(tmp_path):
    path = tmp_path / "facts.parquet"
    pq.write_table(schemas.from_rows([{"subject_qid": "Q513", "property_id": "P2044", "hop": 1, "value_type": "quantity",
                                       "amount": 8848.86, "unit_qid": "Q11573", "unit_label": "metre"}], schemas.FACTS), path)
    table = knowledge_table(path, fetched_from(KnowledgeConfig(endpoint="https://query.wikidata.org/sparql"), "x"),
                            "2026-12-07")
    assert table.schema == schemas.KNOWLEDGE
    row = table.to_pylist()[0]
    assert (row["amount"], row["unit_label"], row["fetched_from"], row["fetched_on"]) == (
        8848.86, "metre", "https://query.wikidata.org/sparql", "2026-12-07")
    assert fetched_from(KnowledgeConfig(), "sha256:ab") == "oxigraph-mirror:sha256:ab"


def test_links_are_kept_for_the_images_with_questions():
    links = schemas.from_rows([{"object_id": f"vg:{i}/o1", "image_id": f"vg:{i}", "qid": "Q1"} for i in range(3)],
                              schemas.ENTITY_LINKS)
    kept = links_of_images(links, pa.chunked_array([["vg:2", "vg:0", "vg:2"]]))
    assert kept["image_id"].to_pylist() == ["vg:0", "vg:2"]


def test_a_replayed_build_answers_from_one_file_of_its_work_folder_and_queries_no_endpoint(tmp_path):
    answers = pa.table({"query": ["SELECT ?a", "SELECT ?b"], "answer": ['[{"a": "Q1"}]', "[]"]},
                       schema=schemas.KNOWLEDGE_QUERIES)
    path = replay_file(answers, tmp_path / "work")
    assert path == tmp_path / "work" / "knowledge_replay.parquet"
    assert replay_client(path).select("SELECT ?a") == [{"a": "Q1"}]
    with replay_endpoint() as endpoint:
        assert endpoint == "replay:"


def _shard(stage_dir, table, number, rows, schema):
    (stage_dir / table).mkdir(parents=True, exist_ok=True)
    pq.write_table(schemas.from_rows(rows, schema), stage_dir / table / f"part-{number:05d}.parquet")


def test_the_release_knowledge_tables_are_the_facts_every_answer_and_the_links_of_the_pool_images(tmp_path):
    link_dir, facts_dir = tmp_path / "link", tmp_path / "facts"
    for number in (0, 1):
        _shard(link_dir, "entity_links", number, [{"object_id": f"vg:{number}/o1", "image_id": f"vg:{number}",
                                                   "qid": "Q90"}], schemas.ENTITY_LINKS)
    _shard(link_dir, "knowledge_queries", 0, [{"query": "SELECT ?link", "answer": "[]"}], schemas.KNOWLEDGE_QUERIES)
    _shard(facts_dir, "knowledge_queries", 0, [{"query": "SELECT ?fact", "answer": "[]"}], schemas.KNOWLEDGE_QUERIES)
    facts_path = tmp_path / "facts_merged.parquet"
    pq.write_table(schemas.from_rows([{"subject_qid": "Q90", "property_id": "P17", "hop": 1, "value_type": "item",
                                       "value_qid": "Q142"}], schemas.FACTS), facts_path)
    inputs = {"knowledge": "sha256:ab", "knowledge_date": "2026-12-01"}
    tables_of = release_knowledge_tables(KnowledgeConfig(), inputs, facts_path, link_dir, facts_dir)
    pool = pa.table({"image_id": ["vg:1", "vg:1"], "question_id": ["q1", "q2"]})
    for used in (pool, pool["image_id"]):  # the in-memory pool, or the image ids of pool files
        tables = tables_of(used)
        assert list(tables) == ["knowledge", "knowledge_queries", "entity_links"]
        assert tables["knowledge"].to_pylist()[0]["fetched_from"] == "oxigraph-mirror:sha256:ab"
        assert tables["knowledge"].to_pylist()[0]["fetched_on"] == "2026-12-01"
        assert sorted(tables["knowledge_queries"]["query"].to_pylist()) == ["SELECT ?fact", "SELECT ?link"]
        assert tables["entity_links"]["image_id"].to_pylist() == ["vg:1"]
