import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.annotation_exports.batches import BatchFilters, safe_relative_path, select_batch
from reasonvqa.annotation_exports.tables import read_source_tables
from reasonvqa.stage import write_parquet
from tests.annotation_exports.fixtures import image_rows, question, region_rows, write_fixture_release


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return read_source_tables(write_fixture_release(tmp_path_factory.mktemp("rel")))


def many_questions(n: int) -> pa.Table:
    rows = [question(f"q{i:03d}", "sa1b:1" if i % 4 else "sa1b:2", "Paris", ["Paris", "Lyon", "Nice", "Lille"],
                     hop=1 + i % 3) for i in range(n)]
    return schemas.from_rows(rows, schemas.QUESTIONS)


def test_release_tables_are_read_with_the_pool_as_questions(tables):
    assert tables.kind == "release" and tables.identity["name"] == "ann"
    assert tables.questions.num_rows == 6 and tables.regions.num_rows == 7 and tables.images.num_rows == 4


def test_selection_is_deterministic_stratified_and_seeded(tables):
    many = type(tables)(root=tables.root, kind="release", questions=many_questions(120), regions=tables.regions,
                        images=tables.images)
    first = select_batch(many, 30, seed=1)
    assert [i.item_id for i in first.items] == [i.item_id for i in select_batch(many, 30, seed=1).items]
    assert first.batch_id == select_batch(many, 30, seed=1).batch_id
    assert [i.item_id for i in select_batch(many, 30, seed=2).items] != [i.item_id for i in first.items]
    per_hop = {h: sum(1 for i in first.items if i.stratum.endswith(f"|{h}")) for h in (1, 2, 3)}
    assert per_hop == {1: 10, 2: 10, 3: 10}  # 40 questions per hop: proportional shares
    assert first.skipped == {"over_batch_size": 90}
    assert len(first.items) == 30 and [i.item_id for i in first.items] == sorted(i.item_id for i in first.items)


def test_filters_and_decided_items(tables):
    assert [i.item_id for i in select_batch(tables, 10, filters=BatchFilters(hops=[1])).items] == ["q2"]
    assert [i.item_id for i in select_batch(tables, 10, filters=BatchFilters(kinds=["verified"])).items] == ["q5"]
    assert [i.item_id for i in select_batch(tables, 10, filters=BatchFilters(sources=["nuscenes"])).items] == ["q4", "q5"]
    assert len(select_batch(tables, 10, filters=BatchFilters(domains=["outdoor"])).items) == 6  # visual domain
    assert [i.item_id for i in select_batch(tables, 10, decided={"q1", "q2", "q3", "q4"}).items] == ["q5", "q6"]
    keep = select_batch(tables, 10, decided={"q1"}, filters=BatchFilters(undecided=False))
    assert "q1" in [i.item_id for i in keep.items]


def test_items_show_their_image_regions_or_their_evidence(tables):
    batch = select_batch(tables, 10)
    by_id = {i.item_id: i for i in batch.items}
    assert by_id["q1"].region_ids == ["sa1b:1/g1", "sa1b:1/g2", "sa1b:1/g3"] and by_id["q6"].region_ids == []
    evidence = pa.array([["sa1b:1/g2"], None, None, None, None, None], pa.list_(pa.string()))
    at = tables.questions.schema.get_field_index("evidence_region_ids")  # the release schema has the column (null)
    questions = (tables.questions.set_column(at, "evidence_region_ids", evidence) if at >= 0
                 else tables.questions.append_column("evidence_region_ids", evidence))
    with_evidence = type(tables)(root=tables.root, kind="release", questions=questions, regions=tables.regions,
                                 images=tables.images)
    assert {i.item_id: i for i in select_batch(with_evidence, 10).items}["q1"].region_ids == ["sa1b:1/g2"]


def test_stage_output_without_questions_gives_one_item_per_image(tmp_path):
    stage = tmp_path / "proposals"
    write_parquet(schemas.from_rows(region_rows(), schemas.REGIONS), stage / "regions" / "part-00000.parquet")
    images = [dict(r, file_path="../escape.jpg") if r["image_id"] == "sa1b:2" else r for r in image_rows()]
    write_parquet(schemas.from_rows(images, schemas.IMAGES), stage / "images" / "part-00000.parquet")
    batch = select_batch(read_source_tables(stage), 10)
    assert [i.item_id for i in batch.items] == ["nuscenes:cam1", "sa1b:1"]
    assert batch.skipped == {"file_name_leaves_images_folder": 1}


def test_images_without_a_known_size_are_skipped(tmp_path):
    stage = tmp_path / "stage"
    boxes = [r for r in region_rows() if "mask" not in r]  # nuScenes boxes: no mask gives the size
    write_parquet(schemas.from_rows(boxes, schemas.REGIONS), stage / "regions" / "part-00000.parquet")
    batch = select_batch(read_source_tables(stage), 10)
    assert batch.items == [] and batch.skipped == {"image_size_unknown": 1}


@pytest.mark.parametrize("path, ok", [("a/b.jpg", True), ("b.jpg", True), ("a/../b.jpg", True), ("../b.jpg", False),
                                      ("a/../../b.jpg", False), ("/etc/passwd", False), ("C:/x.jpg", False),
                                      ("a\\..\\b.jpg", False), ("", False), ("..", False)])
def test_safe_relative_path(path, ok):
    assert safe_relative_path(path) is ok
