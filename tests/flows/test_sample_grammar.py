"""End to end: every distinct question of the sample release, of every kind, parses with a link grammar
(number agreement of "Is/Are", no raw labels with typos or quotes, no coordinates)."""

from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from reasonvqa.config import sample_config
from reasonvqa.flows.build_reasonvqa import build_reasonvqa
from tests.tasks.questions.link_grammar import unparsed

pytestmark = pytest.mark.integration


def test_at_least_99_percent_of_the_distinct_questions_of_every_kind_parse(tmp_path):
    release = Path(build_reasonvqa(sample_config(), str(tmp_path / "out")))
    questions = pl.concat([pl.read_parquet(release / s / "*.parquet") for s in ("train", "test")], how="diagonal_relaxed")
    by_kind = defaultdict(set)
    for kind, question in questions.select("kind", "question").iter_rows():
        by_kind[kind].add(question)
    assert {"template", "grounded"} <= set(by_kind)
    for kind, texts in sorted(by_kind.items()):
        _, counted = unparsed(sorted(texts))
        assert len(counted) <= 0.01 * len(texts), (kind, len(texts), counted)
    assert not questions["question"].str.contains(r"\[\d").any()  # no box coordinates
    assert not questions["question"].str.contains('"').any()  # no quoted raw labels
