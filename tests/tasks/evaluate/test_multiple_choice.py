"""ReasonVQA's accuracies on literal questions, per hop and per domain, against hand counts."""

from __future__ import annotations

import polars as pl

from reasonvqa.tasks.evaluate.answers import normalized
from reasonvqa.tasks.evaluate.multiple_choice import score_multiple_choice
from reasonvqa.tasks.evaluate.predictions import Prediction
from reasonvqa.tasks.evaluate.summary import by_group, summarize

ROWS = pl.DataFrame({
    "question_id": ["q1", "q2", "q3", "q4", "q5"],
    "answer": ["Paris", "15 December 1832", "France", "United Kingdom", "green"],
    "choices": [["Paris", "Lisbon", "Beijing", "Rome"], ["4 July 1790", "15 December 1832", "3 March 1847", "1 May 1900"],
                ["Portugal", "France", "Nepal", "Chile"], ["France", "United Kingdom", "Peru", "Laos"], None],
    "n_hop": [1, 2, 2, 3, 1],
    "domains": [["Places & Locations"], ["Temporal Concepts"], ["Places & Locations"], ["Places & Locations"], None],
}, schema_overrides={"n_hop": pl.Int8})


def test_normalize():
    assert normalized(pl.Series(["The Eiffel-Tower.", "eiffel tower", "An apple", None])).to_list() == [
        "eiffel tower", "eiffel tower", "apple", None]


def test_accuracy_per_hop_and_domain():
    predicted = [
        Prediction("the paris"),             # q1: the answer picks "Paris" (articles dropped): right, open right
        Prediction("whatever", choice=1),    # q2: index 1 = "15 December 1832": right; open wrong
        Prediction("France", choice="Nepal"),  # q3: the choice decides: wrong; open right
        Prediction("", choice=7),            # q4: index out of range picks nothing: wrong; open wrong
        Prediction("Green"),                 # q5: no choices: open only, right
    ]
    scores = score_multiple_choice(ROWS, predicted)
    assert scores["multiple_choice"].to_list() == [1.0, 1.0, 0.0, 0.0, None]
    assert scores["open_ended"].to_list() == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert summarize(scores["multiple_choice"])["value"] == 0.5 and summarize(scores["multiple_choice"])["n"] == 4
    hops = by_group(scores, "n_hop", ["multiple_choice", "open_ended"])
    assert {h: (m["multiple_choice"]["value"], m["multiple_choice"]["n"]) for h, m in hops.items()} == {
        "1": (1.0, 1), "2": (0.5, 2), "3": (0.0, 1)}
    assert hops["1"]["open_ended"] == {"value": 1.0, "n": 2, "ci95": [1.0, 1.0]}
    domains = by_group(scores, "domains", ["multiple_choice"])
    assert domains["Places & Locations"]["multiple_choice"]["value"] == round(1 / 3, 4)
    assert domains["Temporal Concepts"]["multiple_choice"]["value"] == 1.0
    assert domains["unknown"]["multiple_choice"]["n"] == 0  # q5 has no domains and no choices
