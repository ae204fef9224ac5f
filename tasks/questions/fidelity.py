"""A built release checked against the knowledge it came from (ReasonVQA 3.2: single-answer questions).

For every templated question of train and test, the route is walked again over the build's fact
table from the item the asked object links to:

- ``route_not_in_facts``: a hop has no single-valued fact to follow (the question cannot be traced);
- ``subject_type_mismatch``: a hop's subject is not of its property's subject types (P31/P279*);
- ``multiple_values``: the asked subject+property has several truthy values (labeled or not);
- ``distractor_is_true``: a distractor names a true value of the asked fact (its label, or a
  closed-set member whose label or alias is that value).

``scan_release`` returns the problems (question_id, problem) and counts; an empty list is a pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import polars as pl

from reasonvqa import schemas
from reasonvqa.stage import read_table
from reasonvqa.tasks.questions.bank import TemplateBank
from reasonvqa.tasks.questions.index import truthy_facts
from reasonvqa.tasks.questions.subject_types import ANY, class_memberships, constraint_classes, property_types
from reasonvqa.tasks.questions.text import normalize_expr, normalize_text


def release_questions(release: Path) -> pl.DataFrame:
    """The templated questions of a release's train and test splits."""
    parts = [pl.read_parquet(p) for split in ("train", "test") for p in sorted((Path(release) / split).glob("*.parquet"))]
    if not parts:
        return cast(pl.DataFrame, pl.from_arrow(schemas.QUESTIONS.empty_table()))
    questions = pl.concat(parts, how="diagonal_relaxed")
    return questions.filter(pl.col("kind").is_null() | (pl.col("kind") == "template"))  # null: before kinds existed


def scan_release(release: Path, work: Path, bank: TemplateBank) -> dict:
    """Problems of ``release`` against the facts and entity links under the build's ``work`` folder."""
    questions = release_questions(release)
    facts = pl.read_parquet(Path(work) / "facts_merged.parquet")
    links = cast(pl.DataFrame, pl.from_arrow(read_table(Path(work) / "link", "entity_links", schemas.ENTITY_LINKS)))
    return scan_questions(questions, facts, links, bank)


def scan_questions(questions: pl.DataFrame, facts: pl.DataFrame, links: pl.DataFrame, bank: TemplateBank) -> dict:
    """``scan_release`` on tables: questions (release rows), facts (FACTS), links (ENTITY_LINKS)."""
    templates = bank.properties
    clean = truthy_facts(facts, set(templates) | {"P31", "P279"}).with_columns(
        n_values=pl.col("value_key").n_unique().over("subject_qid", "property_id")
    )
    memberships = class_memberships(clean, constraint_classes(templates))
    fitting = memberships.join(property_types(templates), on="class_qid").select("subject_qid", "property_id").unique()
    fitting = fitting.with_columns(fits=pl.lit(True))
    unconstrained = [pid for pid, t in templates.items() if ANY in t.subject_types]
    edges = clean.filter(pl.col("n_values") == 1, pl.col("value_kind") == "item").select(
        "subject_qid", "property_id", next_qid="value_qid"
    )
    start = links.select(pl.col("object_id").alias("start_object"), "image_id", start_qid="qid").unique(
        subset=["start_object", "image_id"], keep="first"
    )
    rows = questions.select(
        "question_id", "image_id", "route", "answer", "choices", "answer_category", "property_id",
        start_object=pl.col("object_ids").list.first(),
    ).join(start, on=["start_object", "image_id"], how="left")

    problems: list[pl.DataFrame] = []
    subject = rows.select("question_id", "route", "answer", "choices", "answer_category", subject_qid="start_qid")
    max_hops = cast(int | None, rows["route"].list.len().max()) or 0  # polars types max() as any scalar
    for hop in range(max_hops):
        here = subject.filter(pl.col("route").list.len() > hop).with_columns(property_id=pl.col("route").list.get(hop))
        here = here.join(fitting, on=["subject_qid", "property_id"], how="left")  # fits: true or null
        misfit = pl.col("fits").is_null() & ~pl.col("property_id").is_in(unconstrained)
        problems.append(here.filter(pl.col("subject_qid").is_not_null() & misfit)
                        .select("question_id", problem=pl.lit("subject_type_mismatch")))
        inner = here.filter(pl.col("route").list.len() > hop + 1)
        moved = inner.join(edges, on=["subject_qid", "property_id"], how="left")
        problems.append(moved.filter(pl.col("next_qid").is_null()).select("question_id", problem=pl.lit("route_not_in_facts")))
        finals = here.filter(pl.col("route").list.len() == hop + 1)
        problems.append(_answer_problems(finals, clean, templates))
        subject = pl.concat([
            finals.select("question_id", "route", "answer", "choices", "answer_category", "subject_qid").clear(),
            moved.filter(pl.col("next_qid").is_not_null()).select(
                "question_id", "route", "answer", "choices", "answer_category", subject_qid="next_qid"
            ),
        ])
    problems.append(rows.filter(pl.col("start_qid").is_null()).select("question_id", problem=pl.lit("route_not_in_facts")))
    found = pl.concat(problems).unique().sort("question_id", "problem")
    counts = found.group_by("problem").len().sort("problem")
    return {
        "questions": questions.height,
        "problems": found.to_dicts(),
        "counts": dict(zip(counts["problem"].to_list(), counts["len"].to_list())),
    }


def _answer_problems(finals: pl.DataFrame, clean: pl.DataFrame, templates: dict) -> pl.DataFrame:
    """multiple_values and distractor_is_true for questions whose route ends at this hop."""
    values = clean.select("subject_qid", "property_id", "n_values", "value_label", "value_kind")
    asked = finals.join(values, on=["subject_qid", "property_id"], how="left")
    multiple = asked.filter(pl.col("n_values") > 1).select("question_id", problem=pl.lit("multiple_values"))
    missing = asked.filter(pl.col("n_values").is_null()).select("question_id", problem=pl.lit("route_not_in_facts"))
    aliases = _closed_set_aliases(templates)
    named = asked.filter(pl.col("value_kind").is_in(["item", "string"]), pl.col("value_label").is_not_null())
    distractors = named.explode("choices").filter(pl.col("choices") != pl.col("answer"))
    distractors = distractors.with_columns(norm=normalize_expr(pl.col("choices")), true_norm=normalize_expr(pl.col("value_label")))
    distractors = distractors.join(aliases, left_on=["property_id", "norm"], right_on=["property_id", "member"], how="left")
    clash = (pl.col("norm") == pl.col("true_norm")) | (pl.col("alias").fill_null("") == pl.col("true_norm"))
    true_choice = distractors.filter(clash).select("question_id", problem=pl.lit("distractor_is_true"))
    return pl.concat([multiple, missing, true_choice])


def _closed_set_aliases(templates: dict) -> pl.DataFrame:
    rows = [
        {"property_id": pid, "member": normalize_text(c.label), "alias": normalize_text(a)}
        for pid, t in templates.items()
        for c in t.choices
        for a in c.aliases
    ]
    return pl.DataFrame(rows, schema={"property_id": pl.String, "member": pl.String, "alias": pl.String})
