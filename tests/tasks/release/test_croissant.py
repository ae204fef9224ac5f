"""The release's croissant.json validates with mlcroissant and describes every Parquet folder and column."""

import json

import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.release.writer import write_release


@pytest.fixture
def release(tmp_path, splits):
    pool = pa.concat_tables(list(splits.values()))
    images = schemas.from_rows([{"image_id": "vg:1", "source": "vg", "source_image_id": "1", "width": 8, "height": 6,
                                 "url": "http://127.0.0.1:1/1.jpg", "license": "CC BY 4.0"}], schemas.IMAGES)
    return write_release(tmp_path, "demo", "1.0.0", splits, pool=pool, stats_dir=None, config={"seed": 0},
                         inputs={"vg": "s1"}, tables={"images": images})


def test_croissant_validates_and_lists_each_folder(release):
    import mlcroissant as mlc

    dataset = mlc.Dataset(jsonld=release / "croissant.json")  # raises on any validation error
    metadata = dataset.metadata
    # the one recommendation left out: a publication date would make the bytes depend on the day
    assert {w.split("] ")[1] for w in metadata.ctx.issues.warnings} == {
        'Property "https://schema.org/datePublished" is recommended, but does not exist.'}
    assert metadata.name == "demo" and metadata.version == "1.0.0"
    assert [r.name for r in metadata.record_sets] == ["train", "test", "pool", "images"]
    train = next(r for r in metadata.record_sets if r.name == "train")
    assert [f.name for f in train.fields] == [f"train/{c}" for c in schemas.QUESTIONS.names]
    document = json.loads((release / "croissant.json").read_text())
    assert {d["includes"] for d in document["distribution"]} == {
        "train/*.parquet", "test/*.parquet", "pool/*.parquet", "images/*.parquet"}


def test_croissant_records_read_back_the_questions(release):
    import mlcroissant as mlc

    dataset = mlc.Dataset(jsonld=release / "croissant.json")
    records = list(dataset.records("test"))
    assert len(records) == 1
    assert records[0]["test/answer"] == b"Madrid"


def test_mlcroissant_refuses_a_field_without_its_file_set(release):
    import mlcroissant as mlc

    document = json.loads((release / "croissant.json").read_text())
    document["distribution"] = [d for d in document["distribution"] if d["@id"] != "test-parquet"]
    broken = release.parent / "broken.json"
    broken.write_text(json.dumps(document))
    with pytest.raises(mlc.ValidationError, match="test-parquet"):
        mlc.Dataset(jsonld=broken)
