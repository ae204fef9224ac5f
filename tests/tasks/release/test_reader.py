"""Reading a release's splits back: whole, a few columns, or the rows of a mask one file at a time."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.release.reader import read_columns, read_rows, read_split
from tests.tasks.balance.conftest import pool_of, question


@pytest.fixture
def release(tmp_path):
    pool = pool_of([question(f"q{i}", f"vg:{i % 3}", "P1", f"a{i}") for i in range(7)])
    (tmp_path / "pool").mkdir()
    pq.write_table(pool.slice(0, 4), tmp_path / "pool" / "part-00000.parquet")
    pq.write_table(pool.slice(4), tmp_path / "pool" / "part-00001.parquet")
    return tmp_path, pool


def test_the_rows_of_a_mask_across_files_are_the_filtered_pool(release):
    root, pool = release
    keep = np.array([True, False, False, True, False, True, True])
    rows = read_rows(root, "pool", keep)
    assert rows.schema.equals(schemas.QUESTIONS, check_metadata=False)
    assert rows["question_id"].to_pylist() == ["q0", "q3", "q5", "q6"]
    assert rows.equals(read_split(root, "pool").filter(pa.array(keep)))
    with pytest.raises(ValueError, match="7 rows, the mask has 6"):
        read_rows(root, "pool", keep[:6])


def test_a_few_columns_are_read_and_a_missing_one_is_nulls(release, tmp_path):
    root, _ = release
    table = read_columns(root, "pool", ["answer", "n_hop"])
    assert table.column_names == ["answer", "n_hop"] and table["answer"].to_pylist()[5] == "a5"
    old = tmp_path / "old"
    (old / "pool").mkdir(parents=True)
    pq.write_table(read_split(root, "pool").drop_columns(["route"]), old / "pool" / "part-00000.parquet")
    routes = read_columns(old, "pool", ["route", "answer"])
    assert routes["route"].type == schemas.QUESTIONS.field("route").type and routes["route"].null_count == 7


def test_files_without_a_selected_row_are_skipped_and_none_selected_is_empty(release, monkeypatch):
    root, _ = release
    read = []
    original = pq.read_table
    monkeypatch.setattr(pq, "read_table", lambda path, *a, **k: read.append(path.name) or original(path, *a, **k))
    rows = read_rows(root, "pool", np.array([False] * 4 + [True, False, False]))
    assert rows["question_id"].to_pylist() == ["q4"] and read == ["part-00001.parquet"]
    empty = read_rows(root, "pool", np.zeros(7, dtype=bool))
    assert empty.num_rows == 0 and empty.schema.equals(schemas.QUESTIONS)
