"""Select questions by kind, task type and hallucination flag (``--kinds``, ``--task-types``, ``--hallucination``)."""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.codes import filled
from reasonvqa.tasks.balance.filters import EmptySelectionError

Hallucination = Literal["only", "exclude"]


class KindSelection(BaseModel):
    """Which question kinds a build or re-split keeps (null: no filter on that field)."""

    model_config = ConfigDict(extra="forbid")

    kinds: list[str] | None = Field(default=None, description="template, verified, grounded, grounded_vlm.")
    task_types: list[str] | None = Field(default=None, description="knowledge, free_form, identification, attribute, "
                                         "ocr, spatial, counting, comparison.")
    hallucination: Hallucination | None = Field(default=None, description="only: hallucination questions only; "
                                                "exclude: none of them.")

    def active(self) -> dict:
        """The filters that are set, as recorded in a re-split's filter report."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


def select_kinds(pool: pa.Table, selection: KindSelection) -> tuple[pa.Table, dict]:
    """The rows of ``pool`` that pass ``selection`` and a report of what each filter dropped.

    A row without ``kind`` (a 1.x templated row) counts as ``template``; without ``is_hallucination``
    as not a hallucination. Raises EmptySelectionError when nothing is left.
    """
    table, report = select_kinds_part(pool, selection)
    require_selected(report)
    return table, report


def select_kinds_part(pool: pa.Table, selection: KindSelection) -> tuple[pa.Table, dict]:
    """``select_kinds`` of one part of a pool, without the empty check (the parts' reports add up
    with ``add_select_reports``). ``pool`` itself is returned when every row passes (no copy of it)."""
    keep: pa.ChunkedArray | pa.Array | None = None
    dropped: dict[str, int] = {}
    checks = []
    if selection.kinds is not None:
        checks.append(("kinds", pc.is_in(filled(pool, "kind", "template"), pa.array(sorted(set(selection.kinds))))))
    if selection.task_types is not None:
        checks.append(("task_types", pc.fill_null(pc.is_in(filled(pool, "task_type", ""),
                                                            pa.array(sorted(set(selection.task_types)))), False)))
    if selection.hallucination is not None:
        flag = filled(pool, "is_hallucination", False)
        checks.append(("hallucination", flag if selection.hallucination == "only" else pc.invert(flag)))
    for name, passed in checks:
        failed = pc.invert(passed) if keep is None else pc.and_(keep, pc.invert(passed))
        dropped[name] = int(pc.sum(failed).as_py() or 0)
        keep = passed if keep is None else pc.and_(keep, passed)
    table = pool if keep is None or not any(dropped.values()) else pool.filter(keep)
    available = {"kinds": _distinct(pool, "kind", "template"),
                 "task_types": [t for t in _distinct(pool, "task_type", "") if t]}
    report = {"filters": selection.active(), "questions_in": pool.num_rows, "questions_out": table.num_rows,
              "dropped_by": dropped, "available": available}
    return table, report


def _distinct(pool: pa.Table, name: str, default) -> list:
    """The column's distinct values (nulls as ``default``), sorted; counted in Arrow, not as Python objects per row."""
    return sorted(set(pc.unique(filled(pool, name, default)).to_pylist()))


def add_select_reports(reports: list[dict]) -> dict:
    """The report of a whole pool from its parts' ``select_kinds_part`` reports (at least one)."""
    total = {"filters": reports[0]["filters"], "questions_in": sum(r["questions_in"] for r in reports),
             "questions_out": sum(r["questions_out"] for r in reports),
             "dropped_by": {name: sum(r["dropped_by"][name] for r in reports) for name in reports[0]["dropped_by"]},
             "available": {name: sorted(set().union(*(r["available"][name] for r in reports)))
                           for name in reports[0]["available"]}}
    return total


def require_selected(report: dict) -> None:
    """Raise EmptySelectionError when filters are set and no question is left."""
    if report["filters"] and report["questions_out"] == 0:
        raise EmptySelectionError(f"the filters {report['filters']} match none of the {report['questions_in']} "
                                  f"questions (dropped by filter: {report['dropped_by']}; available: "
                                  f"{report['available']})", report)
