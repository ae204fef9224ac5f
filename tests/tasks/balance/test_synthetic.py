import pyarrow.compute as pc

from reasonvqa import schemas
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.pipeline import balance_and_split
from tests.tasks.balance.synthetic import DOMAINS, synthetic_pool


def test_synthetic_pool_is_valid_and_zipf_like():
    pool = synthetic_pool(20_000, 3_000, 30, seed=1)
    assert pool.schema.equals(schemas.QUESTIONS)
    assert pc.count_distinct(pool["question_id"]).as_py() == 20_000
    row = pool.slice(0, 1).to_pylist()[0]
    assert row["answer"] in row["choices"] and len(set(row["choices"])) == 4
    assert set(pc.list_flatten(pool["domains"]).to_pylist()) <= set(DOMAINS)
    counts = sorted(pc.value_counts(pool["answer"]).field("counts").to_pylist(), reverse=True)
    assert counts[0] > 20 * counts[len(counts) // 2]  # a heavy head and a long tail


def test_question_ratio_follows_image_ratio_at_scale():
    done = balance_and_split(synthetic_pool(20_000, 3_000, 30, seed=2), BalanceConfig(), SplitConfig(), seed=0)
    split, balanced = done.split, done.balance
    assert abs(split.report["train_share_questions"] - 0.7) <= 0.02
    assert set(split.train["image_id"].to_pylist()).isdisjoint(split.test["image_id"].to_pylist())
    assert balanced.report["questions_removed"] == balanced.removed.num_rows > 0
