"""Balancing groups of the question kinds that have no Wikidata property.

Answer balancing (balance.py) works per ``property_id`` group. Templated questions carry the
property they ask about; verified and grounded questions ask about no property, so their group
is ``<kind>:<task_type>``, with ``:hallucination`` appended for hallucination questions (whose
answers state an absence and must not crowd out the grounded answers of the same task type).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def group_key(kind: str | None, task_type: str | None, is_hallucination: bool | None) -> str:
    """The balancing group of one row of a kind without a property (pure-Python form of ``with_group_keys``)."""
    key = f"{kind or 'unknown'}:{task_type or 'none'}"
    return key + ":hallucination" if is_hallucination else key


def with_group_keys(pool: pa.Table) -> pa.Table:
    """``pool`` with every null ``property_id`` of a non-template row set to its group key."""
    if "kind" not in pool.column_names or pool.num_rows == 0:
        return pool
    prop = pool["property_id"]
    kind = pool["kind"]
    fill = pc.and_(pc.is_null(prop), pc.fill_null(pc.not_equal(kind, "template"), False))
    if not pc.any(fill).as_py():
        return pool
    task = pc.fill_null(pool["task_type"], "none") if "task_type" in pool.column_names else pa.nulls(pool.num_rows, pa.string())
    halluc = (pc.fill_null(pool["is_hallucination"], False) if "is_hallucination" in pool.column_names
              else pa.array([False] * pool.num_rows))
    base = pc.binary_join_element_wise(pc.fill_null(kind, "unknown"), pc.fill_null(task, "none"), ":")
    keys = pc.if_else(halluc, pc.binary_join_element_wise(base, pa.scalar("hallucination"), ":"), base)
    column = pc.if_else(fill, keys, prop)
    return pool.set_column(pool.schema.get_field_index("property_id"), "property_id", column)
