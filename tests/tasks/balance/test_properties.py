"""Property tests over random pools: accounting, order, bound, disjointness, ratio, determinism."""

import io
import json

import pyarrow as pa
import pyarrow.compute  # noqa: F401 (pa.compute)
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonvqa.tasks.balance.balance import balance_questions
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.pipeline import balance_and_split
from tests.tasks.balance.reference import reference_balance, reference_split
from reasonvqa.tasks.balance.split import split_images
from reasonvqa.tasks.balance.summary import ranked
from tests.tasks.balance.conftest import pool_of, question

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Answer indices drawn as floor(sqrt(u)) over u in 0..48 are skewed toward small indices.
skewed_answer = st.integers(0, 48).map(lambda u: int(u**0.5))


@st.composite
def pools(draw, min_images: int = 1):
    n_images = draw(st.integers(min_images, 80))
    n_groups = draw(st.integers(1, 4))
    rows = draw(
        st.lists(st.tuples(st.integers(0, n_images - 1), st.integers(0, n_groups - 1), skewed_answer), min_size=1, max_size=300)
    )
    images = sorted({r[0] for r in rows})
    # every drawn image index gets at least one question so image counts are what was drawn
    rows += [(i, 0, 0) for i in range(n_images) if i not in images] if min_images > 1 else []
    order = draw(st.permutations(range(len(rows))))
    return pool_of(
        [question(f"q{j:04d}", f"vg:{rows[j][0]}", f"P{rows[j][1]}", f"ans{rows[j][2]}") for j in order]
    )


balance_configs = st.builds(
    BalanceConfig,
    rounds=st.integers(0, 8),
    top_k=st.integers(1, 6),
    head_tail_bound=st.sampled_from([1.0, 1.25, 1.5, 2.0]),
    max_ratio=st.sampled_from([2.0, 3.0, 10.0]),
    max_round_fraction=st.sampled_from([0.1, 0.25, 1.0]),
)


def group_counts(table) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for prop, answer in zip(table["property_id"].to_pylist(), table["answer"].to_pylist()):
        out.setdefault(prop, {}).setdefault(answer, 0)
        out[prop][answer] += 1
    return out


def parquet_bytes(table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


@SETTINGS
@given(pools(), balance_configs, st.integers(0, 2**32))
def test_balancing_accounts_for_every_question_and_keeps_order(pool, config, seed):
    result = balance_questions(pool, config, seed)
    kept, removed = result.kept["question_id"].to_pylist(), result.removed["question_id"].to_pylist()
    assert sorted(kept + removed) == sorted(pool["question_id"].to_pylist())
    before, after = group_counts(pool), group_counts(result.kept)
    for prop, counts in before.items():
        kept_counts = after.get(prop, {})
        assert set(kept_counts) == set(counts)  # balancing never empties an answer
        for x in counts:
            for y in counts:
                if counts[x] > counts[y]:
                    assert kept_counts[x] >= kept_counts[y], (prop, x, y)


@SETTINGS
@given(pools(), balance_configs, st.integers(0, 2**32))
def test_head_tail_bound_holds_at_convergence(pool, config, seed):
    config = config.model_copy(update={"rounds": 500})
    result = balance_questions(pool, config, seed)
    assert result.report["converged"]
    for prop, counts in group_counts(result.kept).items():
        items = ranked(counts)
        tail = sum(c for _, c in items)
        for rank, (answer, count) in enumerate(items):
            tail -= count
            if rank < config.top_k and tail > 0:
                assert count <= config.head_tail_bound * tail, (prop, answer, count, tail)
                assert count <= max(config.max_ratio * items[rank + 1][1], items[rank + 1][1])
    assert result.report["groups_with_bound_violations"] == []


@SETTINGS
@given(pools(), balance_configs, st.integers(0, 2**32))
def test_vectorized_equals_reference_and_is_byte_stable(pool, config, seed):
    fast, slow = balance_questions(pool, config, seed), reference_balance(pool, config, seed)
    assert fast.kept.equals(slow.kept) and fast.removed.equals(slow.removed)
    assert fast.report == slow.report
    again = balance_questions(pool, config, seed)
    assert parquet_bytes(again.kept) == parquet_bytes(fast.kept)
    assert parquet_bytes(again.removed) == parquet_bytes(fast.removed)
    assert json.dumps(again.report, sort_keys=True) == json.dumps(fast.report, sort_keys=True)


split_configs = st.builds(
    SplitConfig,
    train_ratio=st.sampled_from([0.5, 0.7, 0.8, 0.9]),
    pool_min_share=st.sampled_from([0.01, 0.05, 0.2, 0.6]),
)


@SETTINGS
@given(pools(), split_configs, st.integers(0, 2**32))
def test_split_is_image_disjoint_and_matches_reference(pool, config, seed):
    result = split_images(pool, config, seed)
    train_images, test_images = set(result.train["image_id"].to_pylist()), set(result.test["image_id"].to_pylist())
    assert train_images.isdisjoint(test_images)
    assert sorted(result.train["question_id"].to_pylist() + result.test["question_id"].to_pylist()) == sorted(
        pool["question_id"].to_pylist()
    )
    slow = reference_split(pool, config, seed)
    assert result.train.equals(slow.train) and result.test.equals(slow.test) and result.report == slow.report
    again = split_images(pool, config, seed)
    assert parquet_bytes(again.train) == parquet_bytes(result.train)
    assert parquet_bytes(again.test) == parquet_bytes(result.test)


@SETTINGS
@given(pools(min_images=25), split_configs, st.integers(0, 2**32))
def test_image_split_ratio_within_two_points(pool, config, seed):
    # Cumulative rounding puts exactly round(ratio * images) images in train: off by at most
    # half an image, 0.02 at 25 images.
    report = split_images(pool, config, seed).report
    assert abs(report["train_share_images"] - config.train_ratio) <= 0.02 + 1e-9


@SETTINGS
@given(pools(), balance_configs, split_configs, st.integers(0, 2**32))
def test_pipeline_equals_separate_steps(pool, balance_config, split_config, seed):
    split_config = split_config.model_copy(update={"drop_test_pairs_seen_in_train": False})
    balance_config = balance_config.model_copy(update={"hop_shares": None})
    done = balance_and_split(pool, balance_config, split_config, seed)
    alone = balance_questions(pool, balance_config, seed)
    separate = split_images(alone.kept, split_config, seed)
    assert done.split.train.equals(separate.train) and done.split.test.equals(separate.test)
    assert done.split.report == separate.report and done.balance.report == alone.report
    assert done.balance.removed.equals(alone.removed)
    # the reordered pool is train | test | removed: same rows as the input
    n_kept = separate.train.num_rows + separate.test.num_rows
    assert done.balance.kept.equals(done.pool.slice(0, n_kept))
    assert sorted(done.pool["question_id"].to_pylist(), key=str) == sorted(pool["question_id"].to_pylist(), key=str)
    assert done.pool.slice(n_kept)["question_id"].to_pylist() == alone.removed["question_id"].to_pylist()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pool=pools(), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_test_pairs_seen_in_train_are_removed_and_accounted(pool, seed):
    done = balance_and_split(pool, BalanceConfig(), SplitConfig(), seed)
    pairs = lambda t: set(zip(t["question"].to_pylist(), t["answer"].to_pylist()))  # noqa: E731
    assert not pairs(done.split.train) & pairs(done.split.test)
    n = done.split.train.num_rows + done.split.test.num_rows + done.balance.removed.num_rows
    assert n == pool.num_rows == done.pool.num_rows
    dropped = done.balance.removed.filter(pa.compute.equal(done.balance.removed["reason"], "seen_in_train"))
    assert dropped.num_rows == done.split.report["test_pairs_seen_in_train_removed"]
    assert done.split.report["test"]["questions"] == done.split.test.num_rows


def test_hop_quota_follows_the_target_shares():
    from reasonvqa.tasks.balance.pipeline import hop_quota

    shares = {1: 0.305, 2: 0.634, 3: 0.061}
    assert hop_quota({1: 3000, 2: 3000, 3: 3000}, shares) == {1: 1443, 2: 3000, 3: 289}
    assert hop_quota({1: 100, 2: 1000}, shares) == {1: 100, 2: 208}  # hop 3 absent: shares renormalized over 1 and 2
    assert hop_quota({1: 10, 2: 5, 3: 0}, {1: 0.5, 2: 0.5}) == {1: 5, 2: 5, 3: 0}


def test_release_hop_mix_is_reported_against_its_target():
    from tests.tasks.balance.conftest import pool_of, question

    rows = [question(f"q{h}{i}", f"vg:{h}{i}", "P17", f"a{i % 7}", n_hop=h) for h in (1, 2, 3) for i in range(200)]
    done = balance_and_split(pool_of(rows), BalanceConfig(head_tail_bound=10, max_ratio=10), SplitConfig(), seed=0)
    mix = done.balance.report["hop_mix"]
    assert mix["target"] == {"1": 0.305, "2": 0.634, "3": 0.061}
    assert abs(mix["achieved"]["2"] - 0.634) < 0.01 and abs(mix["achieved"]["3"] - 0.061) < 0.01
    assert done.balance.report["removed_by_reason"]["hop_mix"] == sum(mix["before"].values()) - sum(mix["after"].values())
