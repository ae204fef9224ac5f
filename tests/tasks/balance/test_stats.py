import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from reasonvqa.tasks.balance.balance import balance_questions
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.split import split_images
from reasonvqa.tasks.balance.stats import start_stats, write_stats
from tests.tasks.balance.conftest import MODERATE, pool_of, question

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def release_parts():
    rows = []
    for i in range(40):
        answer = "Paris" if i % 4 else "Rome"  # 30 Paris, 10 Rome
        rows.append(
            question(f"q{i:03d}", f"{'gldv2' if i % 5 == 0 else 'vg'}:{i // 2}", "P36", answer,
                     n_hop=1 + i % 3, domains=["Places & Locations"] if i % 2 else ["History & Events", "Places & Locations"],
                     answer_category="literal")
        )
    rows += [question(f"r{i:03d}", f"vg:{i}", "P30", "Europe", answer_category="fixed", domains=[]) for i in range(4)]
    pool = pool_of(rows)
    balanced = balance_questions(pool, MODERATE, seed=0)
    split = split_images(balanced.kept, SplitConfig(), seed=0)
    return pool, balanced, split


def test_writes_every_file_and_counts(tmp_path, release_parts):
    pool, balanced, split = release_parts
    files = write_stats(pool, balanced, split, tmp_path / "stats")
    assert sorted(files) == [
        "SUMMARY.md", "answers_before_after.png", "answers_train_test.png", "balance_removed.parquet",
        "balance_report.json", "bias.json", "counts_by_split.png", "divergence_train_test.png", "entropy_before_after.png",
        "split_report.json", "stats.json",
    ]
    for name, path in files.items():
        assert path.is_file() and path.parent == tmp_path / "stats"
        if name.endswith(".png"):
            assert path.read_bytes().startswith(PNG_SIGNATURE)
    stats = json.loads(files["stats.json"].read_text())
    pool_counts = stats["counts"]["pool"]
    assert pool_counts["questions"] == 44 and pool_counts["images"] == 28  # vg:0..19 + 8 gldv2 ids
    assert pool_counts["by_source"] == {"gldv2": 8, "vg": 36}
    assert pool_counts["by_hop"] == {"1": 18, "2": 13, "3": 13}
    # each question counts once per domain; the P30 questions have none
    assert pool_counts["by_domain"] == {"<none>": 4, "History & Events": 20, "Places & Locations": 40}
    assert pool_counts["by_answer_category"] == {"fixed": 4, "literal": 40}
    assert stats["counts"]["balanced"]["questions"] == split.train.num_rows + split.test.num_rows
    assert stats["counts"]["train"]["questions"] == split.train.num_rows
    # P36: 30 Paris / 10 Rome -> bound 1.5 x 10 = 15 Paris
    assert stats["top_answers"]["P36"]["before_order"][0] == {
        "answer": "Paris", "pool": 30, "balanced": 15,
        "train": stats["top_answers"]["P36"]["before_order"][0]["train"],
        "test": stats["top_answers"]["P36"]["before_order"][0]["test"],
    }
    assert stats["entropy_bits"]["P36"] == {"before": pytest.approx(0.811278), "after": pytest.approx(0.970951)}
    assert stats["entropy_bits"]["P30"] == {"before": 0.0, "after": 0.0}
    assert 0.0 <= stats["train_test_divergence"]["overall"] <= 1.0
    assert stats["balancing"]["removed_by_reason"] == {"head_tail_bound": 15}
    summary = files["SUMMARY.md"].read_text()
    assert "[answers_before_after.png](answers_before_after.png)" in summary
    assert "single answer" in summary  # P30 has one answer: the warning reaches the page


def test_same_inputs_give_identical_bytes(tmp_path, release_parts):
    pool, balanced, split = release_parts
    first = write_stats(pool, balanced, split, tmp_path / "a")
    second = write_stats(pool, balanced, split, tmp_path / "b")
    for name in first:
        assert first[name].read_bytes() == second[name].read_bytes(), name


def test_figures_rendered_on_a_thread_are_the_same_files(tmp_path, release_parts):
    pool, balanced, split = release_parts
    expected = write_stats(pool, balanced, split, tmp_path / "a")
    with ThreadPoolExecutor(max_workers=1) as figures:
        files, rendered = start_stats(pool, balanced, split, tmp_path / "b", figures)
        assert sorted(files) == sorted(expected)  # the PNGs are named before they exist
        rendered.result()
    for name in expected:
        assert files[name].read_bytes() == expected[name].read_bytes(), name


def test_degenerate_release_still_gets_stats(tmp_path):
    pool = pool_of([question("q1", "vg:1", "P17", "France")])
    balanced = balance_questions(pool, BalanceConfig(), seed=0)
    split = split_images(balanced.kept, SplitConfig(), seed=0)
    files = write_stats(pool, balanced, split, tmp_path)
    stats = json.loads(files["stats.json"].read_text())
    assert stats["counts"]["test"]["questions"] == 0
    assert stats["train_test_divergence"]["overall"] is None
    assert stats["train_test_divergence"]["groups_only_in_one_split"] == ["P17"]
    assert any("a split is empty" in w for w in stats["split"]["warnings"])
    assert files["divergence_train_test.png"].read_bytes().startswith(PNG_SIGNATURE)


def test_bias_report_in_slices_is_the_whole_report(tmp_path, monkeypatch):
    from reasonvqa.tasks.balance import stats
    from reasonvqa.tasks.balance.pipeline import plan_release
    from tests.tasks.balance.synthetic import synthetic_pool

    done = plan_release(synthetic_pool(3_000, 400, 12, seed=2), BalanceConfig(), SplitConfig(), 0)
    whole = write_stats(done.pool, done.balance, done.split, tmp_path / "whole")["bias.json"].read_bytes()
    monkeypatch.setattr(stats, "BIAS_ROWS", 250)  # several slices of train and of test
    sliced = write_stats(done.pool, done.balance, done.split, tmp_path / "sliced")["bias.json"].read_bytes()
    assert sliced == whole and json.loads(whole)["questions"] > 1_000


def test_counts_of_row_views_equal_counts_of_tables(release_parts):
    """Views of one table (as plan_release gives them, counted by label) and separate tables (concatenated)
    give the same counts, nulls and rows without a domain included."""
    import dataclasses

    import numpy as np

    from reasonvqa.row_views import TableRows
    from reasonvqa.tasks.balance import stats

    pool, balanced, split = release_parts
    ids = {q: i for i, q in enumerate(pool["question_id"].to_pylist())}
    rows = {name: np.array([ids[q] for q in t["question_id"].to_pylist()]) for name, t in (("train", split.train), ("test", split.test))}
    view = TableRows(pool, np.arange(pool.num_rows)[::-1])  # every row once, in another order
    views = dataclasses.replace(split, train=view.with_rows(rows["train"]), test=view.with_rows(rows["test"]))
    assert stats._stats(view, balanced, views) == stats._stats(pool, balanced, split)
    answers, counts = stats.labelled_counts(pool.select(stats.COUNT_COLUMNS), stats._labels(pool.num_rows, rows["train"], rows["test"]),
                                            stats.SUBSETS)
    assert counts["pool"]["by_domain"] == {"<none>": 4, "History & Events": 20, "Places & Locations": 40}
    assert answers["pool"]["P36"] == {"Paris": 30, "Rome": 10}
    assert counts["balanced"]["questions"] == counts["train"]["questions"] + counts["test"]["questions"] == 29


def test_splits_with_other_string_widths_than_the_pool_are_counted(release_parts):
    """Train and test tables whose string columns are large_string (another width than the pool's) give the
    same counts: the tables are concatenated with type promotion."""
    import dataclasses

    import pyarrow as pa

    from reasonvqa.tasks.balance import stats

    pool, balanced, split = release_parts

    def widened(table: pa.Table) -> pa.Table:
        return table.cast(pa.schema([f.with_type(pa.large_string()) if f.type == pa.string() else f for f in table.schema]))

    wide = dataclasses.replace(split, train=widened(split.train), test=widened(split.test))
    assert stats._stats(pool, balanced, wide) == stats._stats(pool, balanced, split)


def test_counts_on_the_decisions_codes_equal_counts_on_the_columns(release_parts):
    """plan_release hands its image_id and answer codes to the counts: same stats as encoding the columns again,
    and the codes are the ones counted (a changed code changes the counts)."""
    import dataclasses

    import numpy as np

    from reasonvqa.tasks.balance import stats
    from reasonvqa.tasks.balance.pipeline import POOL_CODES, plan_release

    pool, _, _ = release_parts
    done = plan_release(pool, MODERATE, SplitConfig(), 0)
    assert sorted(done.balance.pool_codes) == sorted(POOL_CODES)
    code, values = done.balance.pool_codes["answer"]
    assert code.dtype == np.int32 and len(code) == pool.num_rows and values.to_pylist() == ["Europe", "Paris", "Rome"]
    without = dataclasses.replace(done.balance, pool_codes=None)
    assert stats._stats(done.pool, done.balance, done.split) == stats._stats(done.pool, without, done.split)
    everything_rome = {"answer": (np.full(pool.num_rows, 2, np.int32), values)}
    answers = stats._stats(done.pool, dataclasses.replace(done.balance, pool_codes=everything_rome), done.split)[0]
    assert answers["top_answers"]["P36"]["questions"]["pool"] == 40
    assert [a["answer"] for a in answers["top_answers"]["P30"]["before_order"]] == ["Rome"]


def test_the_decisions_codes_are_not_counted_for_views_of_another_table(release_parts):
    """Views of another table with as many rows (here the pool reversed) are counted on their own columns: the
    decision's codes number the rows of the table it saw."""
    import dataclasses

    import numpy as np

    from reasonvqa.row_views import TableRows
    from reasonvqa.tasks.balance import stats
    from reasonvqa.tasks.balance.pipeline import plan_release

    pool, _, _ = release_parts
    done = plan_release(pool, MODERATE, SplitConfig(), 0)
    flipped = TableRows(pool.take(np.arange(pool.num_rows)[::-1]), done.pool.rows)
    split = dataclasses.replace(done.split, train=flipped.with_rows(done.split.train_rows),
                                test=flipped.with_rows(done.split.test_rows))
    without = dataclasses.replace(done.balance, pool_codes=None)
    assert stats._stats(flipped, done.balance, split) == stats._stats(flipped, without, split)
    assert done.balance.pool_codes_of is done.pool.shared is not flipped.shared
