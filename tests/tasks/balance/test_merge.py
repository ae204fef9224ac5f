"""The merged question pool: every kind in one schema, in input order, ids distinct."""

import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.balance.merge import merge_pools
from tests.tasks.balance.conftest import pool_of, question


def test_merge_keeps_the_input_order_and_conforms_every_table(tmp_path):
    templated = pool_of([question("q9", "vg:1", "P1", "a"), question("q2", "vg:1", "P1", "b")])
    grounded = pool_of([question("q5", "vg:2", "P2", "c")])
    grounded = grounded.select(grounded.column_names[::-1])  # conformed: the schema's column order
    verified = tmp_path / "questions.parquet"
    pq.write_table(pool_of([question("q1", "vg:3", "P3", "d")]), verified)

    merged = merge_pools(templated, [grounded], verified)

    assert merged.schema.equals(schemas.QUESTIONS)
    assert merged["question_id"].to_pylist() == ["q9", "q2", "q5", "q1"]  # not sorted: the release orders
    assert merged["answer"].to_pylist() == ["a", "b", "c", "d"]


def test_merge_refuses_a_question_id_twice():
    table = pool_of([question("q1", "vg:1", "P1", "a")])
    with pytest.raises(ValueError, match="repeats a question_id"):
        merge_pools(table, [table])


def test_null_ids_are_not_repeats_and_reach_the_balancing():
    rows = [question("q1", "vg:1", "P1", "a"), question(None, "vg:1", "P1", "b"), question(None, "vg:2", "P1", "c")]
    merged = merge_pools(pool_of(rows), [])
    assert merged["question_id"].to_pylist() == ["q1", None, None]
    with pytest.raises(ValueError, match="repeats a question_id"):
        merge_pools(pool_of(rows), [pool_of([question("q1", "vg:3", "P2", "d")])])
