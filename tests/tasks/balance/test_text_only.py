"""Text-only baselines per kind: hallucination from wording, the first option of "A or B", the masked prior."""

import polars as pl
import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.tasks.balance.bias import bias_report, bias_report_parts
from reasonvqa.tasks.balance.text_only import first_option, masked


def test_every_word_outside_the_closed_class_is_masked():
    questions = pl.Series(["What is the object next to the red car?", "How many \"walk\"s are there?",
                           "Is the lamp above or below the floor?", None])
    assert masked(questions).to_list() == ["what is the object next to the _ _", "how many _ _ are there",
                                           "is the _ above or below the _", None]


def test_the_first_option_is_found_on_its_side_of_or():
    questions = pl.Series(["Is the frame to the left or to the right of the box?", "Are there more desks or more chains?",
                           "Which appears larger, the shelves or the cables?", "Which is larger, the box or the box?",
                           "What kind of thing is the discoverer or inventor of this telephone?",
                           "Which appears larger, the arm or the clock?"])
    answers = pl.Series(["left", "chains", "Shelves", "box", "city", "There is no arm in the image."])
    assert first_option(questions, answers).to_list() == [1, 0, 1, None, None, None]


def grounded(qid: str, image: str, question: str, answer: str, halluc: bool) -> dict:
    return dict(question_id=qid, image_id=image, question=question, answer=answer, kind="grounded",
                task_type="spatial", is_hallucination=halluc, n_hop=0)


def release(rows: list[dict]) -> tuple[pa.Table, pa.Table]:
    """Rows of even images go to train, of odd images to test."""
    table = schemas.from_rows(rows, schemas.QUESTIONS)
    odd = pa.array([int(r["image_id"].split(":")[1]) % 2 == 1 for r in rows])
    return table.filter(pa.compute.invert(odd)), table.filter(odd)


def test_wording_that_gives_the_hallucination_away_is_caught_and_one_that_does_not_is_at_chance():
    # every "What is the object next to X?" is a hallucination question, every "Is X left or right of Y?" is not
    telling = [grounded(f"a{i}", f"vg:{i}", f"What is the object next to the thing{i}?", f"There is no thing{i}.", True)
               for i in range(40)]
    telling += [grounded(f"b{i}", f"vg:{i}", f"Is the cup{i} to the left or to the right of the box?", "left", False)
                for i in range(110)]
    report = bias_report(*release(telling))["text_only"]["kinds"]["grounded"]["hallucination_from_wording"]
    assert (report["accuracy"], report["n"], report["chance"], report["check"]) == (1.0, 150, round(110 / 150, 4), "not_met")
    # the same two forms, each with both outcomes in the same shares: the wording tells nothing
    even = [grounded(f"c{i}", f"vg:{i}", f"What is the object next to the thing{i}?", "x", i % 4 == 0) for i in range(80)]
    even += [grounded(f"d{i}", f"vg:{i}", f"Is the cup{i} to the left or to the right of the box?", "left", i % 4 == 0)
             for i in range(80)]
    report = bias_report(*release(even))["text_only"]["kinds"]["grounded"]["hallucination_from_wording"]
    assert report["chance"] == 0.75 and report["accuracy"] == 0.75 and report["check"] == "met"


def test_a_or_b_position_and_the_masked_prior_with_their_chance():
    rows = [grounded(f"e{i}", f"vg:{i}", f"Is the cup{i} to the left or to the right of the box?",
                     "left" if i % 3 else "right", False) for i in range(120)]
    kinds = bias_report(*release(rows))["text_only"]["kinds"]["grounded"]
    first = kinds["answer_first_in_a_or_b"]
    assert (first["share_first"], first["n"], first["chance"], first["check"]) == (0.6667, 120, 0.5, "not_met")
    prior = kinds["masked_question_prior"]
    # one masked question whose train answers are 2/3 "left": the prior says "left", right on test 2/3 of the time
    test_left = sum(1 for i in range(1, 120, 2) if i % 3) / 60
    assert prior["n"] == 60 and prior["accuracy"] == round(test_left, 4) == prior["chance"] and prior["coverage"] == 1.0
    assert "hallucination_from_wording" not in kinds  # one class only


def test_the_report_does_not_depend_on_parts():
    rows = [grounded(f"f{i}", f"vg:{i % 37}", f"Is the cup{i % 5} to the left or to the right of the box?",
                     ["left", "right"][i % 2] if i % 7 else f"There is no cup{i}.", i % 7 == 0) for i in range(300)]
    train, test = release(rows)
    whole = bias_report(train, test)["text_only"]
    parts = [(train.slice(0, 50), test.slice(0, 10)), (train.slice(50), test.slice(10, 0)), (train.slice(0, 0), test.slice(10))]
    assert bias_report_parts(lambda: iter(parts))["text_only"] == whole
    assert set(whole["kinds"]["grounded"]) == {"questions", "hallucination_from_wording", "answer_first_in_a_or_b",
                                               "masked_question_prior"}
