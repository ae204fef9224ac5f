"""Which subjects a property's templates fit: Wikidata class membership through P31/P279.

Every property of the bank names the classes its subject must belong to (``subject_types``,
templates/README.md). A subject belongs to class C when the fact table shows
``subject (P31|P279) c0``, ``c0 P279 c1``, ... ``cn = C`` (the SPARQL path
``(wdt:P31|wdt:P279)/wdt:P279*``): an instance of a subclass of C, or a subclass of C (Visual
Genome objects link to classes: "this dog" is the class Q144). The facts stage fetches the P279
chain of every class it meets (``knowledge.facts``), so the chain is there whatever the hop.

A fact whose subject does not fit its property is never asked and never used as an inner hop,
so no route reads "the medical condition treated by this building". A subject without any P31 or
P279 fact fits nothing (its type is unknown): only properties marked ``any`` ask about it.
"""

from __future__ import annotations

import polars as pl

ANY = "any"
MAX_DEPTH = 32  # P279 chains on Wikidata are far shorter; the bound only guards against cycles


def class_memberships(facts: pl.DataFrame, classes: set[str]) -> pl.DataFrame:
    """(subject_qid, class_qid) for every subject of ``facts`` and every class of ``classes`` it belongs to.

    ``facts`` needs subject_qid, property_id, value_qid (truthy facts; other properties are ignored).
    """
    typing = facts.filter(pl.col("property_id").is_in(["P31", "P279"]), pl.col("value_qid").is_not_null())
    first = typing.select("subject_qid", class_qid="value_qid").unique()
    up = typing.filter(pl.col("property_id") == "P279").select(class_qid="subject_qid", parent="value_qid").unique()
    reached = first
    frontier = first
    for _ in range(MAX_DEPTH):
        step = frontier.join(up, on="class_qid").select("subject_qid", class_qid="parent").unique()
        frontier = step.join(reached, on=["subject_qid", "class_qid"], how="anti")
        if frontier.is_empty():
            break
        reached = pl.concat([reached, frontier])
    return reached.filter(pl.col("class_qid").is_in(sorted(classes))).unique().sort("subject_qid", "class_qid")


def property_types(templates: dict) -> pl.DataFrame:
    """(property_id, class_qid) of every constrained property; ``any`` properties have no rows."""
    rows = [
        {"property_id": pid, "class_qid": qid}
        for pid, t in templates.items()
        for qid in t.subject_types
        if qid != ANY
    ]
    return pl.DataFrame(rows, schema={"property_id": pl.String, "class_qid": pl.String})


def typed_facts(facts: pl.DataFrame, templates: dict, memberships: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``facts`` whose subject belongs to one of its property's subject types
    (all rows of ``any`` properties), in their original order."""
    unconstrained = [pid for pid, t in templates.items() if ANY in t.subject_types]
    fits = (
        memberships.join(property_types(templates), on="class_qid")
        .select("subject_qid", "property_id")
        .unique()
        .with_columns(_fits=pl.lit(True))
    )
    marked = facts.join(fits, on=["subject_qid", "property_id"], how="left", maintain_order="left")
    keep = pl.col("_fits").fill_null(False) | pl.col("property_id").is_in(unconstrained)
    return marked.filter(keep).drop("_fits")


def constraint_classes(templates: dict) -> set[str]:
    """Every class some property's subject may belong to."""
    return {qid for t in templates.values() for qid in t.subject_types if qid != ANY}
