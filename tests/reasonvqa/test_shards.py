import json

import pyarrow as pa

from reasonvqa import schemas, workstore
from reasonvqa.shards import SourceShard, list_shards, prefetch, source_stats, unit_dirs, write_shard_manifest
from reasonvqa.stage import Rejects, StageResult, write_parquet, write_unit


def _write_unit(stage_dir, images: int, name: str) -> None:
    """A source unit of ``images`` shards, one image each (images only: no other table)."""
    def read(n):
        for shard in range(n):
            table = schemas.from_rows([{"image_id": f"{name}{shard}", "source": "counting"}], schemas.IMAGES)
            yield StageResult(outputs={"images": table}, rejects=Rejects("sources_counting", shard), rows_in=1)
    write_unit(stage_dir, images, read)


def test_shards_are_numbered_by_unit_order_not_by_which_unit_finished_first(tmp_path):
    source_dir = tmp_path / "sources_counting"
    first, later = source_dir / "unit-00000", source_dir / "unit-00001"
    _write_unit(later, 1, "b")  # unit 1 is written before unit 0
    _write_unit(first, 2, "a")
    shards = list_shards([("counting", 0, first), ("counting", 1, later)])
    assert [(s.number, s.unit, s.shard) for s in shards] == [(0, 0, 0), (1, 0, 1), (2, 1, 0)]
    assert shards[2].file("images") == later / "images" / "part-00000.parquet"
    assert shards[2].table("images")["image_id"].to_pylist() == ["b0"]
    assert shards[2].table("relations").num_rows == 0  # a table the source does not write reads as empty
    assert shards[2].has("images") and not shards[2].has("relations")
    assert shards[2].inputs(["images", "relations"]) == {"images": later / "images" / "part-00000.parquet",
                                                         "relations": None}
    write_shard_manifest(shards, tmp_path / "shards.json", tmp_path)
    assert json.loads((tmp_path / "shards.json").read_text())[2] == {
        "number": 2, "source": "counting", "unit": 1, "shard": 0, "stage_dir": "sources_counting/unit-00001"}
    assert unit_dirs(source_dir) == [first, later]
    assert [(s["stage"], s["shard"], s["rows_out"]) for s in source_stats(source_dir)] == [
        ("unit-00000", 0, 1), ("unit-00000", 1, 1), ("unit-00001", 0, 1)]


def test_prefetch_gets_every_shard_table_at_once_and_table_then_reads_local_copies(monkeypatch):
    from reasonvqa.storage import work_folder
    from tests.moto_s3 import s3_server

    with s3_server("shards"):
        units = [work_folder("s3://shards/w", "b1") / "sources_vg" / f"unit-{u:05d}" for u in (0, 1)]
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
