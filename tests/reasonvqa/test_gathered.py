import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.gathered import Member, plan_groups, subsequence_positions, write_pieces
from reasonvqa.row_views import TableRows
from reasonvqa.tasks.release import writer
from reasonvqa.tasks.release.writer import write_folders, write_release
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
    from reasonvqa.gathered import _SourceOrder, _variable_width

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


def test_ascending_range_names_the_span_of_ascending_rows_only():
    from reasonvqa.gathered import ascending_range

    assert ascending_range(np.array([3, 4, 5], dtype=np.int32)) == (3, 6)  # contiguous: 3 rows over 3
    assert ascending_range(np.array([3, 5, 9])) == (3, 10)  # ascending, with gaps
    assert ascending_range(np.array([7])) == (7, 8)
    assert ascending_range(np.array([3, 3, 4])) is None  # a repeat
    assert ascending_range(np.array([4, 3, 5])) is None
    assert ascending_range(np.array([], dtype=np.int64)) is None


def test_the_base_gather_slices_a_range_takes_ascending_rows_and_reorders_the_others():
    from reasonvqa.gathered import base_gather

    column = pa.chunked_array([pa.array(["a", "b", None, "d", "e", "f"])])
    contiguous = base_gather(np.array([1, 2, 3]))(column)
    assert contiguous.to_pylist() == ["b", None, "d"]
    assert contiguous.chunk(0).buffers()[2].address == column.chunk(0).buffers()[2].address  # a slice: no copy
    assert base_gather(np.array([0, 3, 5]))(column).to_pylist() == ["a", "d", "f"]
    assert base_gather(np.array([5, 0, 3]))(column).to_pylist() == ["f", "a", "d"]
    ints = pa.chunked_array([pa.array([10, 11, 12, 13])])
    assert base_gather(np.array([3, 1]))(ints).to_pylist() == [13, 11]


# 12 questions whose question_id order takes, in chunks of 4 (ROWS_PER_FILE): rows 0-3 (a contiguous range),
# rows 4, 6, 8, 9 (ascending with gaps) and rows 11, 5, 7, 10 (out of order)
MIXED = ["q01", "q02", "q03", "q04", "q05", "q10", "q06", "q11", "q07", "q08", "q12", "q09"]
MIXED_TRAIN, MIXED_TEST = ["q02", "q03", "q06", "q07", "q09", "q12"], ["q01", "q05", "q11"]


def table_of(ids: list[str]) -> pa.Table:
    """Questions ``ids`` in that row order, in two chunks (as read from shard files)."""
    rows = [question(qid, f"vg:{i // 3}", f"answer {qid}", [f"answer {qid}", "x"]) for i, qid in enumerate(ids)]
    table = schemas.from_rows(rows, schemas.QUESTIONS)
    return pa.concat_tables([table.slice(0, 5), table.slice(5)])


@pytest.mark.parametrize("ids, train, test, spans", [
    (sorted(IDS), TRAIN, TEST, [(0, 4), (4, 8), (8, 11)]),  # a sorted pool (a re-split's): every chunk a range
    (MIXED, MIXED_TRAIN, MIXED_TEST, [(0, 4), (4, 10), None]),  # a range, ascending rows with gaps, out of order
    (IDS, TRAIN, TEST, [None, None, None]),  # not sorted
])
def test_views_in_order_give_the_files_of_the_general_path(tmp_path, monkeypatch, ids, train, test, spans):
    from reasonvqa import gathered

    monkeypatch.setattr(writer, "ROWS_PER_FILE", 4)
    pool = table_of(ids)
    whole = TableRows(pool, rows_of(pool, ids))
    given = {"pool": whole, "train": whole.with_rows(rows_of(pool, train)), "test": whole.with_rows(rows_of(pool, test))}
    assert [gathered.ascending_range(whole.rows[start:start + 4]) for start in range(0, len(ids), 4)] == spans
    jobs = [(name, view, schemas.QUESTIONS) for name, view in given.items()]
    write_folders(tmp_path / "gathered", jobs)
    for name, view in given.items():  # the same rows as materialized tables
        writer.write_table_files(pool.take(view.rows), tmp_path / "alone" / name)
    monkeypatch.setattr(gathered, "ascending_range", lambda rows: None)  # every chunk through _SourceOrder
    write_folders(tmp_path / "general", [(name, whole.with_rows(view.rows), schema) for name, view, schema in jobs])
    assert digests(tmp_path / "gathered") == digests(tmp_path / "alone") == digests(tmp_path / "general")
    assert len(digests(tmp_path / "gathered")) == 6  # 3 pool files, 2 of train, 1 of test
    for name, wanted in (("pool", sorted(ids)), ("train", sorted(train)), ("test", sorted(test))):
        parts = sorted((tmp_path / "gathered" / name).glob("part-*.parquet"))
        read = pa.concat_tables([pq.read_table(p) for p in parts])
        assert read["question_id"].to_pylist() == wanted
        assert read["answer"].to_pylist() == [f"answer {qid}" for qid in wanted]
        assert read["choices"].to_pylist() == [[f"answer {qid}", "x"] for qid in wanted]
