"""The partitioned (on-disk) path and the row-view path write the same release bytes as the in-memory path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from reasonvqa.row_views import TableRows
from reasonvqa.tasks.balance import partitioned
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.partitioned import plan_partitioned
from reasonvqa.tasks.balance.pipeline import balance_and_split, plan_release
from reasonvqa.tasks.balance.stats import write_stats
from reasonvqa.tasks.release import writer
from reasonvqa.tasks.release.writer import write_release
from tests.tasks.balance.conftest import pool_of, question
from tests.tasks.balance.synthetic import synthetic_pool

ROWS_PER_FILE = 1_000  # several part files per folder at this pool size


@pytest.fixture
def pool() -> pa.Table:
    """A generated pool with invalid rows mixed in: empty, missing and repeated ids, a missing answer."""
    table = synthetic_pool(6_000, 900, 20, seed=3)
    ids = table["question_id"].to_pylist()
    ids[10], ids[20], ids[30], ids[40] = "", None, ids[41], ids[5]
    answers = table["answer"].to_pylist()
    answers[50] = None
    # a third of the questions without the image in their text: their (question, answer) pairs recur
    questions = [f"What is the {p}?" if i % 3 == 0 else q for i, (p, q) in
                 enumerate(zip(table["property_id"].to_pylist(), table["question"].to_pylist()))]
    for name, values in (("question_id", ids), ("answer", answers), ("question", questions)):
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, pa.string()))
    return table


def release(done, out: Path, stats: Path) -> Path:
    write_stats(done.pool, done.balance, done.split, stats)
    return write_release(out, "syn", "1.0.0", {"train": done.split.train, "test": done.split.test}, pool=done.pool,
                         stats_dir=stats, config={"seed": 0}, inputs={})


def contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_partitioned_and_view_paths_write_the_in_memory_release(pool, tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "ROWS_PER_FILE", ROWS_PER_FILE)
    monkeypatch.setattr(partitioned, "BATCH_ROWS", 700)  # batches cross files and part boundaries
    monkeypatch.setattr(partitioned, "STATS_ROWS", 300)  # statistics add up over several slices per part
    config = (BalanceConfig(), SplitConfig(), 0)
    shards = [tmp_path / "in" / f"shard-{i}.parquet" for i in range(3)]
    shards[0].parent.mkdir()
    for path, (start, length) in zip(shards, [(0, 2_500), (2_500, 0), (2_500, 3_500)]):
        pq.write_table(pool.slice(start, length), path)

    in_memory = release(balance_and_split(pool, *config), tmp_path / "a", tmp_path / "sa")
    chunked = pa.concat_tables([pool.slice(0, 2_000), pool.slice(2_000, 1_500), pool.slice(3_500)])  # as read from shards
    views = release(plan_release(chunked, *config), tmp_path / "b", tmp_path / "sb")
    on_disk = release(plan_partitioned(shards, *config, tmp_path / "work", rows_per_file=ROWS_PER_FILE),
                      tmp_path / "c", tmp_path / "sc")

    expected = contents(in_memory)
    assert len([name for name in expected if name.startswith("pool/part-")]) == 6
    assert len([name for name in expected if name.startswith("train/part-")]) >= 3
    assert contents(views) == expected
    assert contents(on_disk) == expected
    removed = pq.read_table(in_memory / "stats" / "balance_removed.parquet")
    assert set(pc.unique(removed["reason"]).to_pylist()) >= {"missing_question_id", "duplicate_question_id",
                                                              "missing_answer", "seen_in_train"}


def test_row_views_write_what_the_tables_write(pool, tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "ROWS_PER_FILE", ROWS_PER_FILE)
    rows = pc.sort_indices(pool, [("question_id", "ascending")]).to_numpy()[:2_345]
    writer.write_table_files(TableRows(pool, rows), tmp_path / "view")
    writer.write_table_files(pool.take(rows), tmp_path / "table")
    assert contents(tmp_path / "view") == contents(tmp_path / "table")
    assert len(contents(tmp_path / "view")) == 3


def _rows(n: int = 12, images: int = 6, **change) -> list[dict]:
    """``n`` templated questions over ``images`` images, two property groups of three answers (nothing to balance)."""
    rows = [question(f"q{i:02d}", f"vg:{i % images}", "P36" if i % 2 else "P30", f"a{i % 3}") for i in range(n)]
    return [dict(row, **change) for row in rows]


def _grounded(n: int, choices: list | None = None) -> list[dict]:
    """``n`` grounded questions (a kind without choices and property) over three images."""
    return [question(f"g{i:02d}", f"vg:{i % 3}", None, "yes" if i % 2 else "no", kind="grounded", task_type="exists",
                     choices=choices) for i in range(n)]


def _every_fourth(rows: list[dict], **change) -> list[dict]:
    return [dict(row, **change) if i % 4 == 0 else row for i, row in enumerate(rows)]


# name -> (pool rows, manifest counts (pool, train, test), balancing's removals by reason, multiple-choice questions
# the bias report scores)
EDGE_POOLS = {
    "empty": ([], (0, 0, 0), {}, 0),
    "every_row_removed": (_rows(answer=None), (12, 0, 0), {"missing_answer": 12}, 0),
    "every_answer_empty": (_rows(answer=""), (12, 0, 0), {"missing_answer": 12}, 0),
    "no_image_ids": (_rows(image_id=None), (12, 0, 0), {"missing_image_id": 12}, 0),
    "one_image": (_rows(images=1), (12, 12, 0), {}, 12),
    "null_answers": (_every_fourth(_rows(), answer=None), (12, 7, 2), {"missing_answer": 3}, 9),
    "empty_answers": (_every_fourth(_rows(), answer=""), (12, 7, 2), {"missing_answer": 3}, 9),
    "empty_choices": (_every_fourth(_rows(), choices=[]), (12, 7, 2), {"missing_choices": 3}, 9),
    "every_choices_empty": (_rows(choices=[]), (12, 0, 0), {"missing_choices": 12}, 0),
    "null_hops": (_every_fourth(_rows(), n_hop=None), (12, 8, 4), {}, 12),  # a hop of its own, kept whole
    "kind_without_choices": (_grounded(10), (10, 7, 0), {"seen_in_train": 3}, 0),
    "kind_with_empty_choices": (_rows() + _grounded(10, choices=[]), (22, 18, 4), {}, 12),
}


@pytest.mark.parametrize("name", sorted(EDGE_POOLS))
def test_edge_pools_give_the_same_release_on_both_paths(name, tmp_path):
    """Pools that once crashed the release step (or might): both paths write the same bytes, and the counts."""
    rows, counts, removed, scored = EDGE_POOLS[name]
    pool = pool_of(rows)
    config = (BalanceConfig(), SplitConfig(), 0)
    half = pool.num_rows // 2
    files = [tmp_path / "in" / f"shard-{i}.parquet" for i in range(3)]
    files[0].parent.mkdir()
    for path, (start, length) in zip(files, [(0, half), (half, 0), (half, pool.num_rows - half)]):
        pq.write_table(pool.slice(start, length), path)  # an empty shard file in between

    in_memory = release(plan_release(pool, *config), tmp_path / "a", tmp_path / "sa")
    on_disk = release(plan_partitioned(files, *config, tmp_path / "work"), tmp_path / "b", tmp_path / "sb")

    assert contents(on_disk) == contents(in_memory)
    manifest = json.loads((in_memory / "manifest.json").read_text())
    assert (manifest["counts"]["pool"], manifest["counts"]["train"], manifest["counts"]["test"]) == counts
    stats = json.loads((in_memory / "stats" / "stats.json").read_text())
    assert stats["counts"]["pool"]["questions"] == counts[0]
    assert stats["balancing"]["removed_by_reason"] == removed
    assert json.loads((in_memory / "stats" / "bias.json").read_text())["questions"] == scored


def test_key_columns_are_read_one_chunk_per_column_across_files(tmp_path):
    table = pa.table({"question_id": ["a", "b", "c"], "kind": pa.array([None] * 3, pa.string()), "n_hop": pa.array([1, 2, None], pa.int8()),
                      "choices": [["x"], [], None]})
    paths = [tmp_path / "0.parquet", tmp_path / "1.parquet"]
    pq.write_table(table.slice(0, 2), paths[0], row_group_size=1)  # several chunks per file
    pq.write_table(table.slice(2), paths[1])
    keys = partitioned.read_columns(paths, ["question_id", "kind", "n_hop", "choices"])
    assert keys.column_names == ["question_id", "kind", "n_hop", partitioned.NO_CHOICES]
    assert all(column.num_chunks == 1 for column in keys.columns)
    assert keys["question_id"].to_pylist() == ["a", "b", "c"] and keys["n_hop"].to_pylist() == [1, 2, None]
    assert keys[partitioned.NO_CHOICES].to_pylist() == [False, True, True]  # null kind: templated, needs choices


def test_kind_columns_without_a_kind_are_dropped_from_the_keys():
    """All-null kinds change nothing in ``decide`` (no group key, no hallucination share): not held."""
    keys = pa.table({"question_id": ["a", "b"], "kind": pa.array([None, None], pa.string()),
                     "task_type": pa.array([None, None], pa.string()), "is_hallucination": pa.array([None, None], pa.bool_())})
    assert partitioned._without_unused_kinds(keys).column_names == ["question_id"]
    some = keys.set_column(1, "kind", pa.array([None, "grounded"], pa.string()))
    assert partitioned._without_unused_kinds(some).column_names == keys.column_names


def test_no_pool_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no pool file"):
        plan_partitioned([], BalanceConfig(), SplitConfig(), 0, tmp_path / "work")


def test_the_write_reads_each_spill_part_once_for_pool_train_and_test(pool, tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "ROWS_PER_FILE", ROWS_PER_FILE)
    path = tmp_path / "pool.parquet"
    pq.write_table(pool, path)
    done = plan_partitioned([path], BalanceConfig(), SplitConfig(), 0, tmp_path / "work", rows_per_file=ROWS_PER_FILE)
    reads = []
    mapped = partitioned._mapped

    def counted(part, columns):
        reads.append(part.name)
        return mapped(part, columns)

    monkeypatch.setattr(partitioned, "_mapped", counted)
    out = write_release(tmp_path / "out", "syn", "1.0.0", {"train": done.split.train, "test": done.split.test},
                        pool=done.pool, stats_dir=None, config={"seed": 0}, inputs={})
    assert reads == [f"{k:05d}" for k in range(6)]  # 6,000 rows: six parts, each read once
    expected = release(balance_and_split(pool, BalanceConfig(), SplitConfig(), 0), tmp_path / "a", tmp_path / "sa")
    for folder in ("pool", "train", "test"):
        assert contents(out / folder) == contents(expected / folder)


def test_spilled_rows_chunks_are_the_rows_in_question_id_order_cut_to_the_size(pool, tmp_path):
    path = tmp_path / "pool.parquet"
    pq.write_table(pool, path)
    done = plan_partitioned([path], BalanceConfig(), SplitConfig(), 0, tmp_path / "work", rows_per_file=ROWS_PER_FILE)
    expected = balance_and_split(pool, BalanceConfig(), SplitConfig(), 0)
    for spilled, table in ((done.split.train, expected.split.train), (done.split.test, expected.split.test)):
        chunks = list(spilled.chunks(700))  # pieces of 1,000-row parts cut across part boundaries
        assert [c.num_rows for c in chunks[:-1]] == [700] * (len(chunks) - 1) and 0 < chunks[-1].num_rows <= 700
        assert sum(c.num_rows for c in chunks) == spilled.num_rows == table.num_rows
        assert pa.concat_tables(chunks).equals(table, check_metadata=False)
    pool_chunks = list(done.pool.chunks(1_000))  # 6,000 rows: six full chunks, no empty one after them
    assert [c.num_rows for c in pool_chunks] == [1_000] * 6
    ids = pa.concat_tables(pool_chunks)["question_id"].to_pylist()
    assert ids == pool["question_id"].take(done.balance.question_id_order).to_pylist()
    nothing = list(partitioned.SpilledRows(done.pool.spill, -1, 0).chunks(700))  # a destination without rows
    assert len(nothing) == 1 and nothing[0].num_rows == 0 and nothing[0].schema.equals(done.pool.schema)


def test_the_release_does_not_depend_on_the_pool_row_order(pool, tmp_path, monkeypatch):
    """``merge_pools`` hands the pool over unsorted: sorted, shuffled and as-generated pools give the same files.

    Its ids are distinct, as ``merge_pools`` requires (of a repeated id, the first row in input order is kept)."""
    monkeypatch.setattr(writer, "ROWS_PER_FILE", ROWS_PER_FILE)
    config = (BalanceConfig(), SplitConfig(), 0)
    repeated = pc.is_in(pool["question_id"], pa.array([pool["question_id"][5].as_py(), pool["question_id"][41].as_py()]))
    pool = pool.filter(pc.invert(repeated))
    by_id = pool.take(pc.sort_indices(pool, [("question_id", "ascending")]))
    shuffled = pool.take(np.random.default_rng(7).permutation(pool.num_rows))
    written = [contents(release(plan_release(table, *config), tmp_path / f"out{i}", tmp_path / f"stats{i}"))
               for i, table in enumerate((pool, by_id, shuffled))]
    assert written[0] == written[1] == written[2]
    assert pq.read_table(tmp_path / "out0" / "syn" / "1.0.0" / "pool")["question_id"].to_pylist() == \
        by_id["question_id"].to_pylist()
