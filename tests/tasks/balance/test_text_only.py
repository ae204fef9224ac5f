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


def test_a_or_b_position_with_its_chance():
    rows = [grounded(f"e{i}", f"vg:{i}", f"Is the cup{i} to the left or to the right of the box?",
                     "left" if i % 3 else "right", False) for i in range(120)]
    kinds = bias_report(*release(rows))["text_only"]["kinds"]["grounded"]
    first = kinds["answer_first_in_a_or_b"]
    assert (first["share_first"], first["n"], first["chance"], first["check"]) == (0.6667, 120, 0.5, "not_met")
    assert "hallucination_from_wording" not in kinds  # one class only


def test_the_masked_prior_is_scored_on_every_question_by_the_other_folds():
    # 80 images ask "left or right" (always "left"), 40 "above or below" (always "below"): whatever the folds, the
    # other folds hold both masked texts with "left" the more common answer
    rows = [grounded(f"g{i}", f"vg:{i}", f"Is the cup{i} to the left or to the right of the box?", "left", False)
            for i in range(80)]
    rows += [grounded(f"h{i}", f"vg:{i}", f"Is the lamp{i} above or below the box?", "below", False) for i in range(80, 120)]
    # two masked texts of one question each: no other fold has them, the kind's most common answer ("left") is guessed
    rows += [grounded("u1", "vg:1000", "Which thing is behind the box?", "left", False),
             grounded("u2", "vg:1001", "What is in the middle of the image?", "up", False)]
    prior = bias_report(*release(rows))["text_only"]["kinds"]["grounded"]["masked_question_prior"]
    assert prior["n"] == 122  # train and test: every released question of the kind
    assert prior["accuracy"] == round(121 / 122, 4)  # all 120 by their masked text, u1 by the kind's answer, u2 missed
    assert prior["chance"] == round(81 / 122, 4)  # "left" alone: the 80 + u1
    assert prior["coverage"] == round(120 / 122, 4) and prior["scored_on"] == "train+test, folds by image"


def test_the_masked_prior_splits_a_tie_among_the_other_folds():
    # one masked text; each image has one "left" and one "right" question, so every fold's complement ties: 1/2 each
    rows = [grounded(f"t{i}{side}", f"vg:{i}", f"Is the cup{i} to the left or to the right of the box?", side, False)
            for i in range(60) for side in ("left", "right")]
    prior = bias_report(*release(rows))["text_only"]["kinds"]["grounded"]["masked_question_prior"]
    assert (prior["n"], prior["accuracy"], prior["chance"], prior["coverage"]) == (120, 0.5, 0.5, 1.0)


def test_the_report_does_not_depend_on_parts():
    rows = [grounded(f"f{i}", f"vg:{i % 37}", f"Is the cup{i % 5} to the left or to the right of the box?",
                     ["left", "right"][i % 2] if i % 7 else f"There is no cup{i}.", i % 7 == 0) for i in range(300)]
    train, test = release(rows)
    whole = bias_report(train, test)["text_only"]
    parts = [(train.slice(0, 50), test.slice(0, 10)), (train.slice(50), test.slice(10, 0)), (train.slice(0, 0), test.slice(10))]
    assert bias_report_parts(lambda: iter(parts))["text_only"] == whole
    assert set(whole["kinds"]["grounded"]) == {"questions", "hallucination_from_wording", "answer_first_in_a_or_b",
                                               "masked_question_prior"}


def test_a_release_of_several_kinds_also_reports_every_question_together():
    # 60 grounded "left or right" questions (answer "left") and 40 template questions (answer "Paris"), images 0-99
    rows = [grounded(f"g{i}", f"vg:{i}", f"Is the cup{i} to the left or to the right of the box?", "left", False)
            for i in range(60)]
    rows += [dict(question_id=f"t{i}", image_id=f"gldv2:{i}", question="What is the capital of the country of this "
                  "landmark?", answer="Paris", kind="template", n_hop=2) for i in range(60, 100)]
    kinds = bias_report(*release(rows))["text_only"]["kinds"]
    assert set(kinds) == {"grounded", "template", "all"}
    together = kinds["all"]
    assert together["questions"] == 100 and together["masked_question_prior"]["n"] == 100
    # every masked text is held by other folds with one answer: all 100 right; "left" alone is right for 60
    assert together["masked_question_prior"]["accuracy"] == 1.0 and together["masked_question_prior"]["chance"] == 0.6
    assert together["answer_first_in_a_or_b"]["n"] == 60 == kinds["grounded"]["answer_first_in_a_or_b"]["n"]
    assert kinds["template"]["masked_question_prior"]["n"] == 40
    single = bias_report(*release(rows[:60]))["text_only"]["kinds"]
    assert set(single) == {"grounded"}  # one kind: no "all" entry repeating it
