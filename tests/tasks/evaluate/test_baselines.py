"""The blind baselines' predictions on literal train/test questions, against hand-picked answers."""

from __future__ import annotations

import polars as pl

from reasonvqa.tasks.evaluate.baselines import choices_only, prior, text_only


def frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"question_id": pl.String, "question": pl.String, "answer": pl.String,
                                      "kind": pl.String, "task_type": pl.String, "choices": pl.List(pl.String)},
                        orient="row")


TRAIN = frame([
    ("t1", "What color is the car?", "red", "grounded", "attribute", None),
    ("t2", "What color is the bus?", "red", "grounded", "attribute", None),
    ("t3", "What color is the van?", "blue", "grounded", "attribute", None),
    ("t4", "How many dogs are there?", "2", "grounded", "counting", None),
    ("t5", "How many cats are there?", "3", "grounded", "counting", None),  # a tie 2/3: the smaller text, "2"
    ("t6", "In which country is this tower?", "France", "template", "knowledge", ["France", "Peru", "Chile"]),
])
TEST = frame([
    ("s1", "What color is the boat?", "blue", "grounded", "attribute", None),
    ("s2", "How many birds are there?", "2", "grounded", "counting", None),
    ("s3", "Where is the kettle?", "left", "grounded", "spatial", None),  # masked text unseen, task type unseen
    ("s4", "In which country is this bridge?", "Peru", "template", "knowledge", ["Chile", "Peru", "Laos"]),
])


def answers(predictions: pl.DataFrame) -> dict:
    return dict(zip(predictions["question_id"], predictions["answer"]))


def test_text_only_is_the_masked_question_prior():
    # "what color is the _" -> red (2 of 3); "how many _ are there" -> 2 (tie 2/3); unseen -> the kind's
    # most common train answer: grounded "red"; the template masked text "in which _ is this _" -> France
    assert answers(text_only(TRAIN, TEST)) == {"s1": "red", "s2": "2", "s3": "red", "s4": "France"}


def test_prior_is_per_kind_and_task_type():
    assert answers(prior(TRAIN, TEST)) == {"s1": "red", "s2": "2", "s3": "red", "s4": "France"}
    other = TEST.with_columns(question=pl.lit("zzz"))  # the prior ignores the wording
    assert answers(prior(TRAIN, other)) == answers(prior(TRAIN, TEST))


def test_choices_only_picks_the_most_frequent_released_choice():
    # released choices (train + test): France 1, Peru 2, Chile 2, Laos 1 -> s4 picks Chile (2, first of the tie)
    picked = choices_only(TRAIN, TEST)
    assert answers(picked) == {"s1": "", "s2": "", "s3": "", "s4": "Chile"}
    assert dict(zip(picked["question_id"], picked["choice"])) == {"s1": None, "s2": None, "s3": None, "s4": 0}
