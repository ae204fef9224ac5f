"""Small literal question pools in the QUESTIONS record model."""

from __future__ import annotations

import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.balance.config import BalanceConfig

# The hand-computed expectations of the literal tests use these settings (not the defaults).
MODERATE = BalanceConfig(head_tail_bound=1.5, max_ratio=3.0, max_round_fraction=0.25)


def question(qid: str, image: str, prop: str, answer: str | None, **extra) -> dict:
    """One QUESTIONS row; the fields balancing ignores get plausible fixed values."""
    row = {
        "question_id": qid,
        "image_id": image,
        "image_source": image.split(":")[0] if image else None,
        "object_ids": [f"{image}/o1"],
        "question": f"What is the {prop} of the object in this image?",
        "answer": answer,
        "answer_qid": None,
        "answer_category": "literal",
        "choices": [answer, f"{answer} 2", f"{answer} 3", f"{answer} 4"],
        "n_hop": 1,
        "route": [prop],
        "property_id": prop,
        "domains": ["Places & Locations"],
        "has_scene_graph": False,
        "template_ids": [f"{prop}.main"],
        "template_version": "t1",
        "knowledge_snapshot": "k1",
    }
    row.update(extra)
    return row


def pool_of(rows: list[dict]) -> pa.Table:
    return schemas.from_rows(rows, schemas.QUESTIONS)


def answers_of(table: pa.Table, prop: str | None = None) -> dict[str, int]:
    """{answer: count} of a table (optionally one property group)."""
    counts: dict[str, int] = {}
    for row in table.select(["property_id", "answer"]).to_pylist():
        if prop is None or row["property_id"] == prop:
            counts[row["answer"]] = counts.get(row["answer"], 0) + 1
    return counts


@pytest.fixture
def skewed_pool() -> pa.Table:
    """P36 (capital): Paris x9, Rome x3, Bern x1 over 13 images; P30 (continent): Europe x2, Asia x2."""
    rows = [question(f"q{i:02d}", f"vg:{i}", "P36", "Paris") for i in range(9)]
    rows += [question(f"q{9 + i:02d}", f"vg:{9 + i}", "P36", "Rome") for i in range(3)]
    rows += [question("q12", "vg:12", "P36", "Bern")]
    rows += [
        question("q13", "vg:0", "P30", "Europe"),
        question("q14", "vg:1", "P30", "Europe"),
        question("q15", "vg:2", "P30", "Asia"),
        question("q16", "vg:3", "P30", "Asia"),
    ]
    return pool_of(rows)
