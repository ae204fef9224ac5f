"""Hallucination rows without an allowed absence basis are set aside before balancing, kept in the pool and counted."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError

from reasonvqa import schemas
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.pipeline import balance_and_split

BASES = [None, "taxonomy", "cooccurrence", "review", "refuting_boxes"]


def _pool() -> pa.Table:
    rows = [dict(question_id=f"g{i:02d}", image_id=f"vg:{i % 10}", question=f"How many things {i}?", answer=str(i),
                 kind="grounded", task_type="counting", is_hallucination=False, n_hop=0) for i in range(40)]
    rows += [dict(question_id=f"h{i:02d}", image_id=f"vg:{i % 10}", question=f"How many dogs {i}?",
                  answer=f"There are no dog{i}.", kind="grounded", task_type="counting", is_hallucination=True, n_hop=0,
                  absence_basis=BASES[i % 5]) for i in range(10)]
    return schemas.from_rows(rows, schemas.QUESTIONS)


def _released(done) -> dict[str, str | None]:
    kept = pa.concat_tables([done.split.train, done.split.test]).to_pylist()
    return {q["question_id"]: q["absence_basis"] for q in kept if q["is_hallucination"]}


def _split(config: BalanceConfig):
    return balance_and_split(_pool(), config, SplitConfig(drop_test_pairs_seen_in_train=False), 0)


def test_unbased_rows_are_set_aside_and_every_named_basis_is_taken_by_default():
    done = _split(BalanceConfig(hop_shares=None, hallucination_share=None))
    assert _released(done) == {f"h{i:02d}": BASES[i % 5] for i in range(10) if BASES[i % 5] is not None}
    assert done.balance.report["removed_by_reason"] == {"no_absence_basis": 2}
    removed = done.balance.removed.to_pylist()
    assert sorted((r["question_id"], r["reason"], r["round"]) for r in removed) == [
        ("h00", "no_absence_basis", 0), ("h05", "no_absence_basis", 0)]
    assert done.pool.num_rows == 50  # set aside, not lost: the pool keeps them for review
    assert any("no_absence_basis=2" in w for w in done.balance.report["warnings"])
    assert not any(w.startswith("removed invalid") for w in done.balance.report["warnings"])


def test_absence_bases_keeps_only_the_named_bases():
    done = _split(BalanceConfig(hop_shares=None, hallucination_share=None, absence_bases=["taxonomy", "review"]))
    assert sorted(set(_released(done).values())) == ["review", "taxonomy"]
    assert done.balance.report["removed_by_reason"] == {"absence_basis_not_allowed": 4, "no_absence_basis": 2}
    assert len(done.split.train) + len(done.split.test) == 44  # the 40 other rows are untouched


def test_absence_bases_are_checked():
    with pytest.raises(ValidationError, match="unknown basis"):
        BalanceConfig(absence_bases=["guess"])
    with pytest.raises(ValidationError, match="at least one"):
        BalanceConfig(absence_bases=[])
    assert "absence_bases" not in BalanceConfig().model_dump(mode="json")  # unset: config hashes as before


def test_the_partitioned_engine_sets_aside_the_same_rows(tmp_path):
    from reasonvqa.tasks.balance.partitioned import plan_partitioned, write_pool_files

    config = BalanceConfig(hop_shares=None, hallucination_share=None, absence_bases=["taxonomy", "cooccurrence"])
    split = SplitConfig(drop_test_pairs_seen_in_train=False)
    done = plan_partitioned(write_pool_files(_pool(), tmp_path / "in"), config, split, 0, tmp_path / "work")
    memory = _split(config)
    assert done.balance.report["removed_by_reason"] == memory.balance.report["removed_by_reason"] == {
        "absence_basis_not_allowed": 4, "no_absence_basis": 2}
    assert sorted(done.balance.removed["question_id"].to_pylist()) == sorted(memory.balance.removed["question_id"].to_pylist())
