import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.errors import ReleaseExistsError
from reasonvqa.tasks.release.reader import read_release
from reasonvqa.tasks.release.verify import verify_release
from reasonvqa.tasks.release.writer import EmptySplitError, require_nonempty_splits, write_release


def _write(out, splits, version="1.0.0", **kw):
    pool = pa.concat_tables(list(splits.values()))
    return write_release(out, "demo", version, splits, pool=pool, stats_dir=None,
                         config={"seed": 0}, inputs={"vg": "s1"}, **kw)


def test_release_layout_manifest_and_sorted_rows(tmp_path, splits):
    path = _write(tmp_path, splits)
    assert path == tmp_path / "demo" / "1.0.0"
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["counts"] == {"train": 3, "test": 1, "pool": 4}
    assert manifest["splits"] == ["train", "test"]
    assert set(manifest["files"]) == {"README.md", "croissant.json", "train/part-00000.parquet",
                                      "test/part-00000.parquet", "pool/part-00000.parquet"}
    train = pq.read_table(path / "train" / "part-00000.parquet")
    assert train["question_id"].to_pylist() == ["q1", "q2", "q3"]
    assert train.schema.metadata[b"reasonvqa.schema_version"] == schemas.SCHEMA_VERSION.encode()
    assert [p.name for p in (tmp_path / "demo").iterdir()] == ["1.0.0"]  # no temp folder left


def test_same_input_gives_identical_bytes(tmp_path, splits):
    a = _write(tmp_path / "a", splits)
    b = _write(tmp_path / "b", splits)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_written_release_verifies_and_reads_back(tmp_path, splits):
    path = _write(tmp_path, splits)
    assert verify_release(path) == []
    release = read_release(path)
    assert release.splits["test"]["answer"].to_pylist() == ["Madrid"]
    assert release.pool.num_rows == 4


def test_existing_version_identical_is_kept_different_is_refused(tmp_path, splits):
    path = _write(tmp_path, splits)
    assert _write(tmp_path, splits) == path
    smaller = {"train": splits["train"].slice(0, 2), "test": splits["test"]}
    with pytest.raises(ReleaseExistsError):
        _write(tmp_path, smaller)
    _write(tmp_path, smaller, overwrite=True)
    assert json.loads((path / "manifest.json").read_text())["counts"]["train"] == 2


def test_huggingface_datasets_loads_the_splits(tmp_path, splits):
    datasets = pytest.importorskip("datasets")
    path = _write(tmp_path, splits)
    ds = datasets.load_dataset("parquet", data_dir=str(path), cache_dir=str(tmp_path / "hf"))
    assert set(ds) == {"train", "test"}
    assert sorted(ds["train"]["question_id"]) == ["q1", "q2", "q3"]
    card = datasets.load_dataset(str(path), cache_dir=str(tmp_path / "hf2"))
    assert card["test"]["answer"] == ["Madrid"]




def test_an_empty_split_is_named(splits):
    # `datasets.load_dataset` cannot load a release with an empty split ("corresponds to no data"),
    # so a build that would leave one empty says so instead of publishing it with exit 0
    require_nonempty_splits("demo", "1.0.0", splits, 4)
    with pytest.raises(EmptySplitError, match=r"^release demo 1.0.0: split 'test' is empty \(3 questions in the pool\); x$"):
        require_nonempty_splits("demo", "1.0.0", {"train": splits["train"], "test": splits["test"].slice(0, 0)}, 3, "; x")


def test_a_rebuild_with_the_same_content_on_another_day_is_not_republished(tmp_path, splits):
    pool = pa.concat_tables(list(splits.values()))

    def write(day, tables=splits, **kw):
        return write_release(tmp_path, "demo", "1.0.0", tables, pool=pool, stats_dir=None, config={"seed": 0},
                             inputs={"vg": "s1", "knowledge": f"endpoint:http://x/sparql@{day}", "knowledge_date": day},
                             **kw)

    path = write("2026-03-01")
    manifest = (path / "manifest.json").read_bytes()
    assert json.loads(manifest)["content_hash"].startswith("sha256:")
    assert write("2026-03-02") == path
    assert (path / "manifest.json").read_bytes() == manifest  # still says 2026-03-01: nothing new was published
    assert verify_release(path) == []
    changed = {"train": splits["train"].slice(0, 2), "test": splits["test"]}
    with pytest.raises(ReleaseExistsError):
        write("2026-03-02", changed)
    write("2026-03-02", changed, overwrite=True)
    assert json.loads((path / "manifest.json").read_text())["inputs"]["knowledge_date"] == "2026-03-02"


def test_stats_ready_is_called_before_the_stats_folder_is_copied(tmp_path, splits):
    stats = tmp_path / "stats"
    stats.mkdir()
    (stats / "stats.json").write_text("{}")
    written = []

    def ready():  # e.g. figures finishing on a thread: what it writes reaches the release
        written.append(sorted(p.name for p in (tmp_path / "out").rglob("part-*.parquet")))
        (stats / "late.png").write_bytes(b"png")

    path = write_release(tmp_path / "out", "demo", "1.0.0", splits, pool=pa.concat_tables(list(splits.values())),
                         stats_dir=stats, config={"seed": 0}, inputs={}, stats_ready=ready)
    assert written == [["part-00000.parquet"] * 3]  # pool, train and test written first
    assert (path / "stats" / "late.png").read_bytes() == b"png"
    assert "stats/late.png" in json.loads((path / "manifest.json").read_text())["files"]


def test_a_stats_file_the_card_links_to_must_be_written(tmp_path, splits):
    # e.g. figures still rendering on their thread when the caller forgot stats_ready: no release half-made
    stats = tmp_path / "stats"
    stats.mkdir()
    (stats / "stats.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="stats files not written: stats/answers_train_test.png"):
        write_release(tmp_path / "out", "demo", "1.0.0", splits, pool=pa.concat_tables(list(splits.values())),
                      stats_dir=stats, config={"seed": 0}, inputs={},
                      stats_files={"stats.json": "stats/stats.json", "answers_train_test.png": "stats/answers_train_test.png"})
    assert not (tmp_path / "out" / "demo" / "1.0.0").exists()


@pytest.mark.parametrize("rows, sliced", [
    ([1, 2, 3, 4], True),  # a contiguous range across the chunks: a zero-copy slice
    ([0, 2, 5], False),  # ascending with gaps: taken from the range's chunks
    ([4, 0, 3], False),  # out of order
    ([], False),
])
def test_rows_of_a_view_are_the_rows_taken(rows, sliced):
    import numpy as np

    from reasonvqa.row_views import TableRows, rows_of

    table = pa.concat_tables([pa.table({"id": ["a", "b", "c"], "n": [[0], [1], None]}),
                              pa.table({"id": ["d", "e", "f"], "n": [[3], [], [5, 5]]})])
    picked = rows_of(table, np.array(rows, dtype=np.int32))
    assert picked.to_pydict() == table.take(pa.array(rows, pa.int64())).to_pydict()
    assert (picked["id"].chunk(0).buffers()[2].address == table["id"].chunk(0).buffers()[2].address) is sliced
    view = TableRows(table, rows)
    assert view.select(["n"]).to_pydict() == {"n": [table["n"][i].as_py() for i in rows]}
    assert [t["id"].to_pylist() for t in view.slices(["id"], 2)] == [table["id"].take(rows[s:s + 2]).to_pylist()
                                                                    for s in range(0, len(rows), 2)]


def test_a_staging_folder_whose_writer_is_gone_is_removed_by_the_next_write(tmp_path, splits):
    import os
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # its pid now names no process
    dead = tmp_path / "demo" / f".1.0.0.tmp-{gone.pid}"
    (dead / "train").mkdir(parents=True)
    (dead / "train" / "part-00000.parquet").write_bytes(b"half written")
    live = tmp_path / "demo" / f".1.0.0.tmp-{os.getppid()}"  # a running process: maybe still writing
    live.mkdir()
    other = tmp_path / "demo" / f".2.0.0.tmp-{gone.pid}"  # another version: its own lock, its own build
    other.mkdir()
    _write(tmp_path, splits)
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == sorted(["1.0.0", live.name, other.name])


def test_the_content_hash_ignores_when_knowledge_was_fetched_but_not_what_it_holds():
    """A refetch of the same facts on a later day changes the dated input and the knowledge/ table's fetched_on
    (so its file digest), not the content hash; other facts (``knowledge_content``) or other files change it."""
    from reasonvqa.tasks.release.writer import content_hash

    def manifest(day: str, knowledge_file: str, facts: str, train: str = "aa") -> dict:
        return {"schema_version": "2.1.0", "config_hash": "sha256:c0",
                "inputs": {"source:vg": "sha256:v", "knowledge": f"endpoint:{day}", "knowledge_date": day,
                           "knowledge_content": facts},
                "files": {"README.md": {"sha256": day}, "knowledge/part-00000.parquet": {"sha256": knowledge_file},
                          "train/part-00000.parquet": {"sha256": train}}}

    first = content_hash(manifest("2026-03-01", "k1", "facts-sha256:f1"))
    assert content_hash(manifest("2026-03-02", "k2", "facts-sha256:f1")) == first
    assert content_hash(manifest("2026-03-02", "k2", "facts-sha256:f2")) != first
    assert content_hash(manifest("2026-03-01", "k1", "facts-sha256:f1", train="bb")) != first
    # a manifest without the undated input (written before it existed) keeps hashing its knowledge/ files
    old = manifest("2026-03-01", "k1", "x")
    del old["inputs"]["knowledge_content"]
    changed = manifest("2026-03-01", "k2", "x")
    del changed["inputs"]["knowledge_content"]
    assert content_hash(old) != content_hash(changed)
