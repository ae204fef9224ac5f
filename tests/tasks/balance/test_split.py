import numpy as np
import pytest

from reasonvqa.tasks.balance.config import SplitConfig
from tests.tasks.balance.reference import reference_split
from reasonvqa.tasks.balance.split import MERGED, NO_POOL_ANSWER, split_images
from tests.tasks.balance.conftest import pool_of, question

IMAGES = {  # image -> answers of its questions (all property P1)
    "vg:1": ["A", "A", "B"],
    "vg:2": ["A", "B"],
    "vg:3": ["A", "B", "B"],
    "vg:4": ["A", "C"],
    "vg:5": ["A"],
    "vg:6": ["C", "C"],
    "vg:7": ["C", "B"],
    "vg:8": ["z1"],
    "vg:9": ["z2", "B"],
}
CONFIG = SplitConfig(pool_min_share=0.1, train_ratio=0.7)


@pytest.fixture
def questions():
    rows, n = [], 0
    for image, answers in IMAGES.items():
        for answer in answers:
            rows.append(question(f"q{(n * 7919) % 101:03d}", image, "P1", answer))
            n += 1
    return pool_of(rows)


def images_of(table) -> set[str]:
    return set(table["image_id"].to_pylist())


def test_categories_merges_and_assignment(questions):
    result = split_images(questions, CONFIG, seed=0)
    report = result.report
    assert [p["answer"] for p in report["pool_answers"]] == ["A", "B", "C"]  # z1, z2 under 10%
    assert report["categories_initial"] == 8
    assert report["merged_pair_to_single_answer"] == 3  # vg:3 (B,A), vg:4 (A,C), vg:7 (B,C)
    assert report["merged_into_shared"] == 2  # vg:6 alone in (C), vg:8 alone without pool answer
    assert report["categories_final"] == 4
    assert report["images_without_pool_answer"]["images"] == 1
    category = dict(zip(result.images["image_id"].to_pylist(), result.images["category"].to_pylist()))
    assert category == {
        "vg:1": "A + B", "vg:2": "A + B", "vg:3": "B", "vg:4": "A", "vg:5": "A",
        "vg:6": MERGED, "vg:7": "B", "vg:8": MERGED, "vg:9": "B",
    }
    # Layout (A): vg:4, vg:5 | (A + B): vg:1, vg:2 | (B): vg:3, then vg:7 / vg:9 | merged: vg:6, vg:8;
    # positions 0..8 at ratio 0.7 go T F T T T F T T F.
    train, test = images_of(result.train), images_of(result.test)
    assert {"vg:4", "vg:1", "vg:2", "vg:3", "vg:6"} <= train
    assert {"vg:5", "vg:8"} <= test
    assert len({"vg:7", "vg:9"} & train) == 1
    assert report["train"]["images"] == 6 and report["test"]["images"] == 3


def test_every_question_of_an_image_goes_to_one_split(questions):
    result = split_images(questions, CONFIG, seed=4)
    assert images_of(result.train).isdisjoint(images_of(result.test))
    assert result.train.num_rows + result.test.num_rows == questions.num_rows
    for table in (result.train, result.test):
        ids = table["question_id"].to_pylist()
        assert ids == sorted(ids)
    assert result.train.schema.equals(questions.schema)


def test_no_pool_answer_category_when_nothing_is_frequent(questions):
    result = split_images(questions, SplitConfig(pool_min_share=0.5), seed=0)
    assert result.report["pool_answers"] == []
    assert set(result.images["category"].to_pylist()) == {NO_POOL_ANSWER}
    assert result.report["images_without_pool_answer"] == {
        "images": 9,
        "questions": 18,
        "handling": f"grouped into the category '{NO_POOL_ANSWER}' (or '{MERGED}' if alone) and split like any other",
    }
    assert result.train.num_rows and result.test.num_rows


def test_rows_argument_equals_materialized_subset(questions):
    rows = np.array([i for i in range(questions.num_rows) if i % 3])
    subset = questions.take(rows)
    a = split_images(subset, CONFIG, seed=2)
    b = split_images(questions, CONFIG, seed=2, rows=rows)
    assert a.train.equals(b.train) and a.test.equals(b.test) and a.report == b.report


def test_reference_matches(questions):
    for seed in range(3):
        fast, slow = split_images(questions, CONFIG, seed), reference_split(questions, CONFIG, seed)
        assert fast.train.equals(slow.train) and fast.test.equals(slow.test)
        assert fast.images.equals(slow.images) and fast.report == slow.report


def test_single_image_leaves_test_empty_with_a_warning():
    result = split_images(pool_of([question("q1", "vg:1", "P1", "A"), question("q2", "vg:1", "P1", "B")]), CONFIG, 0)
    assert result.train.num_rows == 2 and result.test.num_rows == 0
    assert any("a split is empty" in w for w in result.report["warnings"])


def test_empty_input():
    result = split_images(pool_of([]), CONFIG, 0)
    assert result.train.num_rows == 0 and result.test.num_rows == 0
    assert result.report["warnings"] == ["no question to split"]


def test_no_rows_of_a_table_with_answers_leaves_the_answer_pool_empty():
    """Balancing removed every row (all answers "" or no image): the answers of the table are not in the pool."""
    table = pool_of([question("q1", "vg:1", "P1", ""), question("q2", "vg:2", "P1", "A")])
    result = split_images(table, CONFIG, 0, rows=np.zeros(0, np.int64), materialize=False)
    assert result.report["pool_answers"] == [] and result.report["questions"] == 0 and result.report["images"] == 0
    assert len(result.train_rows) == 0 and len(result.test_rows) == 0
    assert result.report["warnings"] == ["no question to split"]
    assert result.report == split_images(pool_of([]), CONFIG, 0).report


def test_question_without_image_is_a_clear_error():
    table = pool_of([question("q1", "vg:1", "P1", "A"), question("q2", None, "P1", "A")])
    with pytest.raises(ValueError, match=r"1 question\(s\) have no image_id.*q2"):
        split_images(table, CONFIG, 0)
