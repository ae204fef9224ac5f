import pyarrow as pa

from reasonvqa import workstore
from reasonvqa.stage import write_json, write_parquet
from reasonvqa.storage import work_folder
from reasonvqa.work_files import drop_local_copies, files, files_below, is_remote, location, present, reusable_dir, subfolders


def _write_folder(work):
    """A work folder with two stage folders: ``link`` (a shard and its stats) and ``facts`` (stats only)."""
    write_parquet(pa.table({"a": [1]}), work / "link" / "links" / "part-00000.parquet")
    write_json({"shard": 0}, work / "link" / "_stats" / "part-00000.json")
    write_json({"shard": 0}, work / "facts" / "_stats" / "part-00000.json")


def test_a_local_work_folder_is_read_where_it_is(tmp_path):
    _write_folder(tmp_path)
    assert subfolders(tmp_path, "") == [tmp_path / "facts", tmp_path / "link"]
    assert files(tmp_path / "link" / "_stats", "part-*.json") == [tmp_path / "link" / "_stats" / "part-00000.json"]
    assert files_below(tmp_path, "links/part-*.parquet") == [tmp_path / "link" / "links" / "part-00000.parquet"]
    assert present(tmp_path / "link" / "links" / "part-00000.parquet")
    assert not present(tmp_path / "link" / "links" / "part-00001.parquet")
    assert not is_remote(tmp_path) and location(tmp_path / "link") == str(tmp_path / "link")
    assert reusable_dir(tmp_path / "mirror") == tmp_path / "mirror"
    drop_local_copies(tmp_path)  # nothing for a local folder
    assert (tmp_path / "link" / "links" / "part-00000.parquet").is_file()


def test_a_work_folder_url_is_read_at_the_url_and_fetched_on_demand(monkeypatch):
    from tests.moto_s3 import s3_server

    with s3_server("files"):
        work = work_folder("s3://files/w", "b1")
        _write_folder(work)
        monkeypatch.setattr(workstore, "_base", None)  # another process: an empty mirror
        work = workstore.rebase(work)
        assert not work.exists()
        assert is_remote(work) and location(work / "link") == "s3://files/w/link"
        assert subfolders(work, "") == [work / "facts", work / "link"]
        assert files(work / "link" / "_stats", "part-*.json") == [work / "link" / "_stats" / "part-00000.json"]
        shard = work / "link" / "links" / "part-00000.parquet"
        assert files_below(work, "links/part-*.parquet") == [shard]
        assert not shard.exists()  # listed, not fetched
        assert present(shard) and shard.is_file()
        assert not present(work / "link" / "links" / "part-00001.parquet")
        kept = reusable_dir(work / "mirror")
        assert not is_remote(kept) and kept.parts[-3:] == ("files", "w", "mirror")
        drop_local_copies(work)
        assert not shard.exists()
        assert present(shard)  # the URL still has it
