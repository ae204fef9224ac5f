"""Annotation batches drawn from a work folder or a release at an fsspec URL (moto's S3 server on 127.0.0.1),
read from an empty mirror as a new process would: the same tables as from the folders on disk."""

import json

import pytest
from typer.testing import CliRunner

from reasonvqa import schemas, workstore
from reasonvqa.annotation_exports.batches import select_batch
from reasonvqa.annotation_exports.tables import read_source_tables
from reasonvqa.flows.cli import app
from reasonvqa.stage import write_parquet
from tests.annotation_exports.fixtures import image_rows, question_rows, region_rows, write_fixture_release
from tests.moto_s3 import forget_mirror, s3_filesystem, s3_server

pytestmark = pytest.mark.integration


def write_stage_folder(work) -> None:
    """A build's work folder: questions and proposals shards, and a rejects table that is skipped."""
    write_parquet(schemas.from_rows(question_rows(), schemas.QUESTIONS), work / "questions" / "questions" / "part-00000.parquet")
    write_parquet(schemas.from_rows(region_rows(), schemas.REGIONS), work / "proposals" / "regions" / "part-00000.parquet")
    write_parquet(schemas.from_rows(image_rows(), schemas.IMAGES), work / "sources_sa1b" / "unit-00000" / "images" / "part-00000.parquet")
    write_parquet(schemas.from_rows(region_rows()[:1], schemas.REGIONS), work / "_rejects" / "regions" / "part-00000.parquet")


def same_tables(a, b) -> bool:
    return all((x is None and y is None) or x.equals(y) for x, y in
               ((a.questions, b.questions), (a.regions, b.regions), (a.images, b.images)))


def test_a_work_folder_and_a_release_at_a_url_give_the_tables_on_disk(tmp_path, monkeypatch):
    with s3_server("exports"):
        write_stage_folder(workstore.local_path("s3://exports/work", workstore.new_build()))  # each file PUT as a build's stage writes it
        write_stage_folder(tmp_path / "work")
        release = write_fixture_release(tmp_path / "releases")
        s3_filesystem().put(str(release), "exports/releases/ann/1.0.0", recursive=True)
        forget_mirror(monkeypatch)

        stage, stage_on_disk = read_source_tables("s3://exports/work/"), read_source_tables(tmp_path / "work")
        assert (stage.kind, stage.regions.num_rows) == ("stage", len(region_rows()))  # the _rejects shard skipped
        assert same_tables(stage, stage_on_disk)
        assert select_batch(stage, 10).items == select_batch(stage_on_disk, 10).items
        released, released_on_disk = read_source_tables("s3://exports/releases/ann/1.0.0"), read_source_tables(release)
        assert released.kind == "release" and released.identity == released_on_disk.identity
        assert None not in (released.questions, released.regions, released.images, stage.questions, stage.images)
        assert same_tables(released, released_on_disk)
        with pytest.raises(FileNotFoundError, match=r"^s3://exports/nothing: not a folder"):
            read_source_tables("s3://exports/nothing")
        done = CliRunner().invoke(app, ["export", "--format", "coco", "--source", "s3://exports/releases/ann/1.0.0",
                                        "--size", "2", "--out", str(tmp_path / "coco"), "--store", str(tmp_path / "store")])
        assert done.exit_code == 0, done.output
        assert json.loads(done.output)["items"] == 2
