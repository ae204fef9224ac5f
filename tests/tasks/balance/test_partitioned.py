"""The partitioned (on-disk) path and the row-view path write the same release bytes as the in-memory path."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from reasonvqa.tasks.balance import partitioned
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.partitioned import plan_partitioned
from reasonvqa.tasks.balance.pipeline import balance_and_split, plan_release
from reasonvqa.tasks.balance.stats import write_stats
from reasonvqa.tasks.release import writer
from reasonvqa.tasks.release.writer import write_release
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
    writer.write_table_files(writer.TableRows(pool, rows), tmp_path / "view")
    writer.write_table_files(pool.take(rows), tmp_path / "table")
    assert contents(tmp_path / "view") == contents(tmp_path / "table")
    assert len(contents(tmp_path / "view")) == 3


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
