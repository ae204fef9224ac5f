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
    (all rows of ``any`` properties), in their original order.

    Classes become bits of a mask (a subject's classes, a property's types) so the check is two
    joins and a bitwise and, whatever the number of classes per property."""
    classes = sorted(constraint_classes(templates))
    bit = {qid: i for i, qid in enumerate(classes)}
    words = max(1, -(-len(classes) // 64))
    word_cols = [f"_w{w}" for w in range(words)]

    values = {qid: 1 << (i % 64) for qid, i in bit.items()}

    def masks(pairs: pl.DataFrame, key: str) -> pl.DataFrame:
        pairs = pairs.with_columns(
            _word=pl.col("class_qid").replace_strict(bit, return_dtype=pl.Int64) // 64,
            _value=pl.col("class_qid").replace_strict(values, return_dtype=pl.UInt64),
        )
        cols = [
            pl.when(pl.col("_word") == w).then(pl.col("_value")).otherwise(pl.lit(0, pl.UInt64)).sum().alias(c)
            for w, c in enumerate(word_cols)
        ]
        return pairs.group_by(key).agg(cols)

    # distinct classes per key, so the sum of their bits is their bitwise or
    subject_masks = masks(memberships.filter(pl.col("class_qid").is_in(classes)).unique(), "subject_qid")
    property_masks = masks(property_types(templates).unique(), "property_id").rename({c: c + "p" for c in word_cols})
    unconstrained = [pid for pid, t in templates.items() if ANY in t.subject_types]
    marked = facts.join(subject_masks, on="subject_qid", how="left", maintain_order="left")
    marked = marked.join(property_masks, on="property_id", how="left", maintain_order="left")
    fits = pl.any_horizontal([(pl.col(c).fill_null(0) & pl.col(c + "p").fill_null(0)) != 0 for c in word_cols])
    keep = fits | pl.col("property_id").is_in(unconstrained)
    return marked.filter(keep).drop(*word_cols, *(c + "p" for c in word_cols))


def constraint_classes(templates: dict) -> set[str]:
    """Every class some property's subject may belong to."""
    return {qid for t in templates.values() for qid in t.subject_types if qid != ANY}
