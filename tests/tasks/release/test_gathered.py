import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.release import writer
from reasonvqa.tasks.release.gathered import Member, plan_groups, subsequence_positions, write_pieces
from reasonvqa.tasks.release.writer import TableRows, write_folders, write_release
from tests.tasks.release.conftest import question

# question ids in image order, as a pool arrives (ids are hashes: their order is not the pool's)
IDS = ["q07", "q03", "q10", "q01", "q08", "q05", "q11", "q02", "q09", "q04", "q06"]
TRAIN = ["q01", "q02", "q05", "q06", "q09"]
TEST = ["q04", "q10"]


@pytest.fixture
def pool() -> pa.Table:
    """11 questions in three chunks (as read from shard files), not in question_id order."""
    rows = [question(qid, f"vg:{i // 3}", f"answer {qid}", [f"answer {qid}", "x", "y", "z"]) for i, qid in enumerate(IDS)]
    table = schemas.from_rows(rows, schemas.QUESTIONS)
    return pa.concat_tables([table.slice(0, 4), table.slice(4, 5), table.slice(9)])


def rows_of(pool: pa.Table, ids: list[str]) -> np.ndarray:
    """Row numbers of ``ids`` in ``pool``, in question_id order."""
    where = {qid: i for i, qid in enumerate(pool["question_id"].to_pylist())}
    return np.array([where[qid] for qid in sorted(ids)], dtype=np.int64)


def views(pool: pa.Table, train: list[str], test: list[str]) -> dict[str, TableRows]:
    """What ``plan_release`` gives the writer: the pool in question_id order and its splits, one shared table."""
    whole = TableRows(pool, rows_of(pool, IDS))
    return {"pool": whole, "train": whole.with_rows(rows_of(pool, train)), "test": whole.with_rows(rows_of(pool, test))}


def digests(folder) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*.parquet"))}


def test_subsequence_positions_in_base_order_only():
    where = np.array([2, -1, 0, 1])  # table row -> position in the base view (row 1 is not in it)
    assert subsequence_positions(where, np.array([2, 0])).tolist() == [0, 2]
    assert subsequence_positions(where, np.array([0, 2])) is None  # rows in another order
    assert subsequence_positions(where, np.array([2, 1])) is None  # a row the base lacks
    assert subsequence_positions(where, np.array([], dtype=np.int64)).tolist() == []


def test_splits_of_the_pool_view_form_one_group(pool):
    given = views(pool, TRAIN, TEST)
    other = TableRows(pool, rows_of(pool, TEST))  # same rows, another table holder: not grouped
    [group] = plan_groups([(name, view) for name, view in given.items()] + [("other", other)])
    assert group.base is given["pool"]
    assert [m.folder for m in group.members] == ["pool", "train", "test"]
    assert group.members[1].positions.tolist() == [0, 1, 4, 5, 8]  # q01 q02 q05 q06 q09 among q01..q11


def test_views_that_are_not_subsequences_are_left_alone(pool):
    whole = TableRows(pool, rows_of(pool, IDS))
    backwards = whole.with_rows(rows_of(pool, TRAIN)[::-1])
    assert plan_groups([("pool", whole), ("train", backwards)]) == []
    repeats = TableRows(pool, np.concatenate([rows_of(pool, IDS), rows_of(pool, TEST)]))
    assert plan_groups([("pool", repeats), ("test", repeats.with_rows(rows_of(pool, TEST)))]) == []


@pytest.mark.parametrize("rows_per_file", [1, 2, 3, 4, 100])
@pytest.mark.parametrize("test_ids", [TEST, []])
def test_gathered_files_are_the_bytes_of_each_table_written_alone(pool, tmp_path, monkeypatch, rows_per_file, test_ids):
    monkeypatch.setattr(writer, "ROWS_PER_FILE", rows_per_file)
    given = views(pool, TRAIN, test_ids)
    assert len(plan_groups(list(given.items()))) == 1
    write_folders(tmp_path / "gathered", [(name, view, schemas.QUESTIONS) for name, view in given.items()])
    for name, view in given.items():  # the same rows as plain tables, sliced into files
        writer.write_table_files(pool.take(view.rows), tmp_path / "alone" / name)
    expected = digests(tmp_path / "alone")
    assert digests(tmp_path / "gathered") == expected
    files = {name: -(-len(ids) // rows_per_file) or 1 for name, ids in (("pool", IDS), ("train", TRAIN), ("test", test_ids))}
    assert {name: len(list((tmp_path / "gathered" / name).glob("part-*.parquet"))) for name in files} == files
    for name, ids in (("pool", sorted(IDS)), ("train", TRAIN), ("test", test_ids)):
        parts = sorted((tmp_path / "gathered" / name).glob("part-*.parquet"))
        assert [qid for p in parts for qid in pq.read_table(p)["question_id"].to_pylist()] == ids


def test_a_release_of_views_is_the_release_of_tables(pool, tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "ROWS_PER_FILE", 2)
    given = views(pool, TRAIN, TEST)
    kwargs = {"stats_dir": None, "config": {}, "inputs": {}}
    a = write_release(tmp_path / "a", "demo", "1.0.0", {"train": given["train"], "test": given["test"]},
                      pool=given["pool"], **kwargs)
    b = write_release(tmp_path / "b", "demo", "1.0.0", {name: pool.take(given[name].rows) for name in ("train", "test")},
                      pool=pool.take(given["pool"].rows), **kwargs)
    assert digests(a) == digests(b)
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()


def test_a_failed_file_fails_the_release_and_leaves_nothing(pool, tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "ROWS_PER_FILE", 2)
    real = pq.write_table

    def failing(table, path, **kwargs):
        if "train" in str(path):
            raise OSError("disk full")
        real(table, path, **kwargs)

    monkeypatch.setattr(writer.pq, "write_table", failing)
    given = views(pool, TRAIN, TEST)
    with pytest.raises(OSError, match="disk full"):
        write_release(tmp_path, "demo", "1.0.0", {"train": given["train"], "test": given["test"]},
                      pool=given["pool"], stats_dir=None, config={}, inputs={})
    assert [p.name for p in (tmp_path / "demo").iterdir()] == []


def test_gathering_in_source_order_gives_the_rows_in_their_order():
    from reasonvqa.tasks.release.gathered import _SourceOrder, _variable_width

    column = pa.chunked_array([pa.array([["a"], None, ["b", "c"]]), pa.array([[], ["d"]])], pa.list_(pa.string()))
    rows = np.array([4, 0, 3, 1, 2])
    assert _SourceOrder(rows).take(column).to_pylist() == [["d"], ["a"], [], None, ["b", "c"]]
    assert _variable_width(column) and _variable_width(pa.chunked_array([["x"]]))
    assert not _variable_width(pa.chunked_array([[1, 2]])) and not _variable_width(pa.chunked_array([[None]], pa.string()))


def test_pieces_of_any_length_are_cut_into_files_of_the_size():
    from concurrent.futures import ThreadPoolExecutor

    table = pa.table({"n": list(range(9))})
    lengths = {"a": [3, 0, 5, 1], "b": [0, 0, 0, 0]}  # b: no rows at all -> one empty file
    starts = {name: np.cumsum([0, *sizes]) for name, sizes in lengths.items()}
    chunks = iter([[table.slice(starts[name][i], lengths[name][i]) for name in lengths] for i in range(4)])
    files = {}

    def write_part(held, folder, number):
        files[(folder, number)] = held.pop()["n"].to_pylist()

    with ThreadPoolExecutor(max_workers=2) as threads:
        write_pieces([Member("a", None), Member("b", None)], chunks, 4, threads, write_part, table.schema)
    assert files == {("a", 0): [0, 1, 2, 3], ("a", 1): [4, 5, 6, 7], ("a", 2): [8], ("b", 0): []}
