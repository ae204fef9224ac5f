"""The release of a build's question shards: one pool of every kind, the tables of its images, the release folder."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.flows.config import sample_config
from reasonvqa.flows.assemble_release import (
    BuildTables, assemble_release, merge_kinds, regions_of_pool, release_stats_dir,
)
from reasonvqa.tasks.balance.kind_filters import KindSelection
from reasonvqa.tasks.release.reader import read_release
from tests.tasks.balance.synthetic import synthetic_pool


def regions(image_ids: list[str]) -> pa.Table:
    return schemas.from_rows([{"region_id": f"{image}/r{k}", "image_id": image, "label": "tree", "x": 1.0, "y": 2.0,
                               "w": 3.0, "h": 4.0, "area": 12.0, "origin": "annotation:vg"}
                              for image in image_ids for k in range(2)], schemas.REGIONS)


def links_of(used) -> dict[str, pa.Table]:
    """A knowledge-tables function as ``release_knowledge_tables`` gives: the facts, the answers, the links of
    the used images."""
    images = sorted(set(used["image_id"].to_pylist()))
    facts = schemas.from_rows([{"subject_qid": "Q1", "property_id": "P17", "hop": 1, "value_type": "item",
                                "value_qid": "Q142", "fetched_from": "oxigraph-mirror:sha256:ab",
                                "fetched_on": "2026-12-01"}], schemas.KNOWLEDGE)
    answers = pa.table({"query": ["SELECT ?x"], "answer": ["[]"]}, schema=schemas.KNOWLEDGE_QUERIES)
    links = schemas.from_rows([{"object_id": f"{i}/o1", "image_id": i, "qid": "Q1"} for i in images],
                              schemas.ENTITY_LINKS)
    return {"knowledge": facts, "knowledge_queries": answers, "entity_links": links}


def kind(table: pa.Table, name: str) -> pa.Table:
    return table.set_column(table.schema.get_field_index("kind"), "kind", pa.array([name] * table.num_rows))


def test_regions_are_kept_for_the_images_that_have_questions():
    pool = pa.table({"image_id": ["vg:2", "vg:2", "vg:0"]})
    assert regions_of_pool(regions(["vg:0", "vg:1", "vg:2"]), pool)["image_id"].to_pylist() == ["vg:0"] * 2 + ["vg:2"] * 2


def test_the_kinds_merge_into_one_pool_and_the_selection_is_reported():
    config = sample_config()
    config.select = KindSelection(kinds=["template"])
    templated = kind(synthetic_pool(120, 20, 3, seed=1), "template")
    grounded = kind(synthetic_pool(30, 5, 2, seed=2, image_offset=1_000), "grounded")
    report: dict = {}
    pool = merge_kinds(templated, [grounded], config, report)
    assert pool.num_rows == 120 and set(pool["kind"].to_pylist()) == {"template"}
    assert (report["select"]["questions_in"], report["select"]["questions_out"]) == (150, 120)


def test_the_build_tables_of_a_pool_are_its_images_regions_knowledge_and_images():
    pool = synthetic_pool(60, 10, 2, seed=3)
    used = sorted(set(pool["image_id"].to_pylist()))
    tables = BuildTables(regions(used + ["vg:999"]), links_of, []).of_pool(pool, sample_config())
    assert list(tables) == ["regions", "knowledge", "knowledge_queries", "entity_links", "images"]
    assert sorted(set(tables["regions"]["image_id"].to_pylist())) == used
    assert tables["entity_links"]["image_id"].to_pylist() == used
    assert tables["images"].images.num_rows == 0  # no source shards given: no image rows
    assert "regions" not in BuildTables(None, links_of, []).of_pool(pool, sample_config())


def question_shards(pool: pa.Table, question_dir: Path) -> None:
    (question_dir / "questions").mkdir(parents=True)
    half = pool.num_rows // 2
    for number, part in enumerate((pool.slice(0, half), pool.slice(half))):
        pq.write_table(part, question_dir / "questions" / f"part-{number:05d}.parquet")


def test_a_release_is_assembled_from_question_shards_and_the_other_kinds(tmp_path):
    config = sample_config()
    templated = kind(synthetic_pool(800, 120, 6, seed=2), "template")
    question_shards(templated, tmp_path / "work" / "questions")
    verified = kind(synthetic_pool(100, 15, 3, seed=5, image_offset=10_000), "verified")
    used = sorted(set(templated["image_id"].to_pylist()) | set(verified["image_id"].to_pylist()))
    checks: list[str] = []
    report: dict = {}
    release = assemble_release(tmp_path / "work" / "questions", [verified], BuildTables(regions(used), links_of, []),
                               config, tmp_path / "out", tmp_path / "work", {"source:vg": "sha256:x"}, report, False,
                               still_held=lambda: checks.append("checked"))
    assert release == tmp_path / "out" / config.release.name / config.release.version
    assert checks == ["checked"]  # once, after the tables, before the release is decided
    loaded = read_release(release)
    assert report["select"]["questions_in"] == 900 and 0 < loaded.pool.num_rows <= 900
    assert set(loaded.pool["kind"].to_pylist()) == {"template", "verified"}
    assert sorted(loaded.manifest["tables"]) == ["entity_links", "images", "knowledge", "knowledge_queries", "regions"]
    assert (tmp_path / "work" / "run_report.json").exists() and not (tmp_path / "work" / "partitioned").exists()


def test_a_lost_work_folder_writes_no_release(tmp_path):
    question_shards(kind(synthetic_pool(200, 30, 3, seed=2), "template"), tmp_path / "work" / "questions")

    def lost() -> None:
        raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        assemble_release(tmp_path / "work" / "questions", [], BuildTables(None, links_of, []), sample_config(),
                         tmp_path / "out", tmp_path / "work", {"source:vg": "sha256:x"}, {}, False, still_held=lost)
    assert not (tmp_path / "out").exists()


def test_the_stats_of_a_local_work_folder_are_written_in_it(tmp_path):
    assert release_stats_dir(tmp_path) == tmp_path / "stats"
