import json
from typing import Any, Iterator

import pytest

from reasonvqa import schemas, sources
from reasonvqa.stage import Rejects, RereadUnit, StageResult
from reasonvqa.tasks.sources.ingest import ingest_unit, list_shards, unit_dir, write_shard_manifest

from tests.tasks.sources.conftest import rows


class Counting(sources.Source):
    """Yields ``unit`` shards of one image each; a unit ``("fast", n)`` asks to be reread after its first shard."""

    kind = "counting"
    visual_domain = "robotics"
    license = "MIT"

    def __init__(self) -> None:
        self.reads: list[Any] = []

    def check(self, config: sources.SourceConfig) -> None:
        pass

    def read(self, config: sources.SourceConfig, unit: Any, shard_size: int) -> Iterator[StageResult]:
        self.reads.append(unit)
        mode, n = unit
        for shard in range(n):
            if mode == "fast" and shard == 1:
                raise RereadUnit(("slow", n), "not in order")
            images = schemas.from_rows([{"image_id": f"counting:{mode}{shard}", "source": "counting"}], schemas.IMAGES)
            yield StageResult(outputs={"images": images}, rejects=Rejects("sources_counting", shard), rows_in=1)


def _config(tmp_path):
    return sources.SourceConfig(kind="counting", path=tmp_path)


def test_a_reread_discards_the_first_pass_and_writes_the_second(tmp_path):
    source, stage = Counting(), tmp_path / "unit"
    stats = ingest_unit(source, _config(tmp_path), ("fast", 3), stage, shard_size=1)
    assert source.reads == [("fast", 3), ("slow", 3)]
    assert [s["shard"] for s in stats] == [0, 1, 2]
    images = rows(stage, "images")
    assert [r["image_id"] for r in images] == ["counting:slow0", "counting:slow1", "counting:slow2"]
    assert {(r["visual_domain"], r["license"]) for r in images} == {("robotics", "MIT")}
    # a finished unit is not read again
    assert ingest_unit(source, _config(tmp_path), ("fast", 3), stage, shard_size=1) == stats
    assert len(source.reads) == 2


def test_shard_size_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="shard_size must be >= 1"):
        ingest_unit(Counting(), _config(tmp_path), ("slow", 1), tmp_path / "unit", shard_size=0)


def test_shards_are_numbered_by_unit_order_not_by_which_unit_finished_first(tmp_path):
    source_dir = tmp_path / "sources_counting"
    later, first = unit_dir(source_dir, 1), unit_dir(source_dir, 0)
    ingest_unit(Counting(), _config(tmp_path), ("slow", 1), later, 1)  # unit 1 is written before unit 0
    ingest_unit(Counting(), _config(tmp_path), ("slow", 2), first, 1)
    shards = list_shards([("counting", 0, first), ("counting", 1, later)])
    assert [(s.number, s.unit, s.shard) for s in shards] == [(0, 0, 0), (1, 0, 1), (2, 1, 0)]
    assert shards[2].file("images") == later / "images" / "part-00000.parquet"
    assert shards[2].table("images")["image_id"].to_pylist() == ["counting:slow0"]
    assert shards[2].table("relations").num_rows == 0  # a table the source does not write reads as empty
    write_shard_manifest(shards, tmp_path / "shards.json", tmp_path)
    assert json.loads((tmp_path / "shards.json").read_text())[2] == {
        "number": 2, "source": "counting", "unit": 1, "shard": 0, "stage_dir": "sources_counting/unit-00001"}


def test_prefetch_gets_every_shard_table_at_once_and_table_then_reads_local_copies(monkeypatch):
    import pyarrow as pa

    from reasonvqa import workstore
    from reasonvqa.stage import write_parquet
    from reasonvqa.storage import work_folder
    from reasonvqa.tasks.sources.ingest import SourceShard, prefetch
    from tests.moto_s3 import s3_server

    with s3_server("ingest"):
        units = [unit_dir(work_folder("s3://ingest/w", "b1") / "sources_vg", u) for u in (0, 1)]
        shards = [SourceShard(2 * u + s, "vg", u, s, units[u]) for u in (0, 1) for s in (0, 1)]
        for shard in shards:
            write_parquet(pa.table({"image_id": [f"vg:{shard.number}"]}), shard.file("images"))
        monkeypatch.setattr(workstore, "_base", None)  # another process: an empty mirror
        gets = []
        real = workstore._download
        monkeypatch.setattr(workstore, "_download", lambda fs, keys, targets: gets.append(len(keys)) or real(fs, keys, targets))
        fetched = prefetch([workstore.rebase(s) for s in shards], ["images", "regions"])  # no regions were written
        assert gets == [4]
        assert [s.table("images")["image_id"].to_pylist() for s in fetched] == [["vg:0"], ["vg:1"], ["vg:2"], ["vg:3"]]
        assert gets == [4]
