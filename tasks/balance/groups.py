"""Balancing groups of the question kinds that have no Wikidata property.

Answer balancing (balance.py) works per ``property_id`` group. Templated questions carry the
property they ask about; verified and grounded questions ask about no property, so their group
is ``<kind>:<task_type>``, then ``:<form>`` when the row names its wording (the first of its
``template_ids``: a grounded form id, or a hallucination sub-type), with ``:hallucination``
appended for hallucination questions (whose answers state an absence and must not crowd out the
grounded answers of the same task type and form). So grounded answers are balanced per (task
type, form), as templated answers are per property.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

FORM = "__form"  # a decision table's precomputed form (partitioned.py reads no template_ids lists)


def group_key(kind: str | None, task_type: str | None, is_hallucination: bool | None, form: str | None = None) -> str:
    """The balancing group of one row of a kind without a property (pure-Python form of ``with_group_keys``)."""
    key = f"{kind or 'unknown'}:{task_type or 'none'}" + (f":{form}" if form else "")
    return key + ":hallucination" if is_hallucination else key


def forms(table: pa.Table, rows: pa.Array | None = None) -> pa.ChunkedArray | pa.Array | None:
    """Per row: the form of a row of a kind without a property (its first template id; null for templated
    rows, a row without template ids or an empty list); None when ``table`` has neither FORM nor template_ids.
    ``rows``: a mask of the rows to look at (the others null), so templated rows' lists are never read."""
    if FORM in table.column_names:
        return table[FORM]
    if "template_ids" not in table.column_names:
        return None
    if rows is None:
        rows = pc.fill_null(pc.not_equal(table["kind"], "template"), False) if "kind" in table.column_names else None
    if rows is None:
        return None
    at = np.flatnonzero(np.asarray(rows.to_numpy(zero_copy_only=False), dtype=bool))
    out = pa.nulls(table.num_rows, pa.string())
    if not len(at):
        return out
    first = cast(pl.Series, pl.from_arrow(table["template_ids"].take(pa.array(at)))).list.first().to_arrow().cast(pa.string())
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[at] = True
    return pc.replace_with_mask(out, pa.array(mask), first)


def with_forms(table: pa.Table) -> pa.Table:
    """``table`` with its template_ids replaced by FORM (the first id of non-template rows): a string per row."""
    if "template_ids" not in table.column_names or "kind" not in table.column_names:
        return table.drop_columns(["template_ids"]) if "template_ids" in table.column_names else table
    return table.append_column(FORM, forms(table)).drop_columns(["template_ids"])


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
    form = forms(pool, fill)
    if form is not None:  # rows without a form keep <kind>:<task_type>
        form = pc.if_else(pc.equal(form, ""), pa.scalar(None, pa.string()), form)
        base = pc.coalesce(pc.binary_join_element_wise(base, form, ":"), base)
    keys = pc.if_else(halluc, pc.binary_join_element_wise(base, pa.scalar("hallucination"), ":"), base)
    column = pc.if_else(fill, keys, prop)
    return pool.set_column(pool.schema.get_field_index("property_id"), "property_id", column)
