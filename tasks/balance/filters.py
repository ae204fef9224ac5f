"""Simple filters over a question pool for re-splits: domains, image sources, hop counts.

``flows/resplit.py`` reads the FILTER_COLUMNS of a pool, takes ``filter_rows``' mask, then reads the kept rows and
``narrow_selected`` narrows their ``domains``.
"""

from __future__ import annotations

from typing import Literal, Mapping, Sequence, cast

import numpy as np
import polars as pl
import pyarrow as pa

DomainMatch = Literal["route", "any", "all"]


class EmptySelectionError(ValueError):
    """A filter left no question; ``report`` says what each filter dropped and what exists."""

    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report


FILTER_COLUMNS = ("domains", "image_source", "n_hop", "route")  # what the filters read of a pool


def filter_rows(
    pool: pa.Table,
    *,
    domains: list[str] | None = None,
    sources: list[str] | None = None,
    hops: list[int] | None = None,
    domain_match: DomainMatch = "route",
    property_domains: Mapping[str, Sequence[str]] | None = None,
) -> tuple[np.ndarray, dict]:
    """The mask of the questions that pass every given filter (None = no filter on that field) and its report.
    ``pool`` needs only the FILTER_COLUMNS it has (a re-split reads just those of a big pool first).

    A question's ``domains`` are the union of the domains of the properties on its route, and
    properties often carry several (P17 country: Places & Locations, Politics & Government).
    ``domain_match="route"`` (default) keeps a question when every property on its route has a
    selected domain in ``property_domains`` (the template bank's map), exactly what a build
    restricted to those domains would generate, and narrows its ``domains`` to the selected
    ones, so the result holds only those domains. ``"any"`` keeps a question tagged with at
    least one selected domain (its other tags stay); ``"all"`` keeps only questions whose every
    tag is selected. Questions without domains never match. Raises EmptySelectionError (with
    the report) when nothing is left.
    """
    if domains is not None and domain_match == "route" and property_domains is None:
        raise ValueError('domain_match="route" needs property_domains (the template bank\'s property -> domains map)')
    frame = cast(pl.DataFrame, pl.from_arrow(pool.select([c for c in FILTER_COLUMNS if c in pool.column_names])))
    available = _available(frame)
    checks: list[tuple[str, list, pl.Expr]] = []
    if domains is not None:
        selected = pl.lit(pl.Series(sorted(set(domains)), dtype=pl.String))
        inside = pl.col("domains").list.eval(pl.element().is_in(selected.implode()))
        match = inside.list.all() if domain_match == "all" else inside.list.any()
        if domain_match == "route":
            assert property_domains is not None  # checked above
            allowed = sorted(pid for pid, tags in property_domains.items() if set(tags) & set(domains))
            on_route = pl.col("route").list.eval(pl.element().is_in(pl.lit(pl.Series(allowed, dtype=pl.String)).implode()))
            match = on_route.list.all() & (pl.col("route").list.len() > 0)
        checks.append(("domains", sorted(set(domains)), (match & (pl.col("domains").list.len() > 0)).fill_null(False)))
    if sources is not None:
        checks.append(("sources", sorted(set(sources)), pl.col("image_source").is_in(sorted(set(sources))).fill_null(False)))
    if hops is not None:
        checks.append(("hops", sorted(set(hops)), pl.col("n_hop").cast(pl.Int64).is_in(sorted(set(hops))).fill_null(False)))

    keep = np.ones(pool.num_rows, dtype=bool)
    dropped_by = {}
    for name, _, expr in checks:
        passed = frame.select(expr.alias("ok"))["ok"].to_numpy()
        dropped_by[name] = int((keep & ~passed).sum())  # counted against the first filter that drops a row
        keep &= passed
    report = {
        "filters": {name: values for name, values, _ in checks} | ({"domain_match": domain_match} if domains is not None else {}),
        "questions_in": pool.num_rows,
        "questions_out": int(keep.sum()),
        "dropped_by": dropped_by,
        "unknown_values": {
            name: [v for v in values if v not in available[name]] for name, values, _ in checks if any(v not in available[name] for v in values)
        },
        "available": available,
    }
    if not keep.any():
        raise EmptySelectionError(
            f"the filters {report['filters']} match none of the {pool.num_rows} pool questions "
            f"(dropped by filter: {dropped_by}; unknown values: {report['unknown_values']}; "
            f"available: {available})",
            report,
        )
    return keep, report


def narrow_selected(table: pa.Table, domains: list[str] | None, domain_match: DomainMatch) -> pa.Table:
    """The rows ``filter_rows`` kept, with ``domains`` narrowed to the selected ones for ``domain_match="route"``."""
    if domains is not None and domain_match == "route":
        return _narrow_domains(table, sorted(set(domains)))
    return table


def _narrow_domains(table: pa.Table, selected: list[str]) -> pa.Table:
    """Keep only the selected tags in ``domains`` (the other tags came from properties' other domains)."""
    wanted = pl.lit(pl.Series(selected, dtype=pl.String)).implode()
    narrowed = cast(pl.DataFrame, pl.from_arrow(table.select(["domains"]))).select(
        pl.col("domains").list.eval(pl.element().filter(pl.element().is_in(wanted)))
    )
    column = narrowed.to_arrow()["domains"].cast(table.schema.field("domains").type)
    return table.set_column(table.schema.get_field_index("domains"), "domains", column)


def _available(frame: pl.DataFrame) -> dict[str, list]:
    out: dict[str, list] = {"domains": [], "sources": [], "hops": []}
    if "domains" in frame.columns:
        out["domains"] = sorted(frame["domains"].explode().drop_nulls().unique().to_list())
    if "image_source" in frame.columns:
        out["sources"] = sorted(frame["image_source"].drop_nulls().unique().to_list())
    if "n_hop" in frame.columns:
        out["hops"] = sorted(int(h) for h in frame["n_hop"].drop_nulls().unique().to_list())
    return out
