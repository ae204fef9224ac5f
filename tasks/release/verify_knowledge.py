"""Verify the knowledge a release carries: present where its questions need it, and covering every template question.

A release built from knowledge (its config has a ``knowledge`` section) with template questions must hold the
``knowledge``, ``knowledge_queries`` and ``entity_links`` tables (knowledge/release_knowledge.py). Each template
question is then walked through them: from the items its objects are linked to, along its route, one property at
a time; the last property must have a fact there, and an item answer must be one of its values. The facts must be
dated as the manifest's ``knowledge_date`` input says.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import polars as pl
import pyarrow as pa

from reasonvqa.schemas import FACTS_TABLE, KNOWLEDGE_TABLES, LINKS_TABLE
from reasonvqa.tasks.release.reader import read_columns

QUESTION_COLUMNS = ["question_id", "kind", "object_ids", "route", "answer_qid"]


def check_knowledge(root: Path, manifest: dict, records: dict[str, pa.Table | None]) -> list[str]:
    """Problems with the release's knowledge tables (``records``: the record tables verify read, None when
    unreadable, which verify reports itself)."""
    listed = manifest.get("tables", [])
    questions = template_questions(root, [*manifest["splits"], "pool"])
    if questions.is_empty():
        return []
    problems = []
    missing = [t for t in KNOWLEDGE_TABLES if t not in listed]
    if missing and isinstance(manifest.get("config"), dict) and "knowledge" in manifest["config"]:
        problems.append(f"manifest.json: {questions.height} template questions but no {', '.join(missing)} table(s): "
                        "a release carries the knowledge its questions used")
    facts, links = records.get(FACTS_TABLE), records.get(LINKS_TABLE)
    if facts is None or links is None:
        return problems
    facts_pl = cast(pl.DataFrame, pl.from_arrow(facts.select(["subject_qid", "property_id", "value_qid", "fetched_on"])))
    date = manifest.get("inputs", {}).get("knowledge_date")
    if date is not None:
        dated = facts_pl.filter(pl.col("fetched_on") != date).height
        if dated:
            problems.append(f"{FACTS_TABLE}: {dated} facts fetched on another date than the knowledge_date input {date!r}")
    uncovered = uncovered_questions(questions, facts_pl, cast(pl.DataFrame, pl.from_arrow(links.select(["object_id", "qid"]))))
    if uncovered.height:
        first = uncovered.row(0, named=True)
        problems.append(f"{FACTS_TABLE}: {uncovered.height} template questions whose facts it does not hold (first: "
                        f"{first['question_id']}, route {first['route']} from objects {first['object_ids']})")
    return problems


def template_questions(root: Path, splits: list[str]) -> pl.DataFrame:
    """The distinct template questions of ``splits`` (kind ``template``), with their objects, route and item answer."""
    frames = []
    for split in splits:
        table = cast(pl.DataFrame, pl.from_arrow(read_columns(root, split, QUESTION_COLUMNS)))
        frames.append(table.filter(pl.col("kind") == "template"))
    return pl.concat(frames).unique("question_id", maintain_order=True).drop("kind")


def uncovered_questions(questions: pl.DataFrame, facts: pl.DataFrame, links: pl.DataFrame) -> pl.DataFrame:
    """The questions whose route cannot be walked through ``facts`` from the items their objects are linked to."""
    nodes = (questions.select("question_id", pl.col("object_ids").alias("object_id")).explode("object_id")
             .join(links, on="object_id").select("question_id", pl.col("qid").alias("node")))
    routes = questions.select("question_id", "route", "answer_qid", pl.col("route").list.len().alias("hops"))
    covered = []
    for step in range(int(cast("int | None", routes["hops"].max()) or 0)):  # hops: list lengths (UInt32)
        asked = routes.filter(pl.col("hops") > step).select("question_id", "hops", "answer_qid",
                                                             pl.col("route").list.get(step).alias("property_id"))
        reached = (nodes.join(asked, on="question_id")
                   .join(facts, left_on=["node", "property_id"], right_on=["subject_qid", "property_id"]))
        last = reached.filter(pl.col("hops") == step + 1)
        answered = last.filter(pl.col("answer_qid").is_null() | (pl.col("answer_qid") == pl.col("value_qid")))
        covered.append(answered.select("question_id").unique())
        nodes = (reached.filter(pl.col("hops") > step + 1).filter(pl.col("value_qid").is_not_null())
                 .select("question_id", pl.col("value_qid").alias("node")).unique())
    done = pl.concat(covered) if covered else pl.DataFrame({"question_id": []}, schema={"question_id": pl.String})
    return questions.join(done, on="question_id", how="anti")
