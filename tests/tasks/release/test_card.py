"""The dataset card's bias report section."""

from reasonvqa.tasks.release.card import render_card


def test_card_shows_the_bias_report_against_its_targets():
    bias = {
        "test_questions": 400, "questions": 1300, "chance": 0.25,
        "baselines": {"closest_to_mean": 0.27, "median": 0.41, "most_frequent_choice": 0.25, "question_prior": 0.12,
                      "numeric_questions": 120},
        "intervals": {"median": {"n": 390, "ci95": [0.3621, 0.4598]}, "question_prior": {"n": 40, "ci95": [0.0468, 0.2607]}},
        "targets": {"choice_only_margin": 0.1, "question_prior_max": 0.5, "min_n": 100,
                    "checks": {"closest_to_mean": "met", "median": "not_met", "most_frequent_choice": "met",
                               "question_prior": "insufficient_n"}},
        "question_words": {"mean": 10.2, "paper_mean": 9.77},
    }
    card = render_card(name="r", version="1", splits=["train", "test"], counts={}, config_hash="h", inputs={},
                       stats_files={}, bias=bias)
    assert "## Bias report" in card and "all 1300 released multiple-choice questions (120 number and date)" in card
    assert "the 400 test questions" in card and "judged only on at least 100 questions" in card
    assert "| choices only: the choice closest to the median (number and date questions) | 41.0% | 390 | 36.2% - 46.0% | no |" in card
    assert ("| question only: the most common train answer of the same question text | 12.0% | 40 | 4.7% - 26.1% | "
            "not judged (too few questions) |") in card
    assert "Average question length: 10.2 words (ReasonVQA paper: 9.77)." in card
    assert "## Bias report" not in render_card(name="r", version="1", splits=["train"], counts={}, config_hash="h",
                                               inputs={}, stats_files={})


def test_card_shows_the_text_only_baselines_per_kind_with_n_and_chance():
    bias = {"questions": 0, "chance": None, "baselines": {}, "targets": {}, "text_only": {"kinds": {
        "grounded": {"questions": 1200,
                     "hallucination_from_wording": {"accuracy": 0.87, "n": 1200, "chance": 0.73, "check": "not_met"},
                     "answer_first_in_a_or_b": {"share_first": 0.52, "n": 310, "chance": 0.5, "check": "met"},
                     "masked_question_prior": {"accuracy": 0.21, "n": 360, "chance": 0.08}},
        "template": {"questions": 90, "masked_question_prior": {"accuracy": 0.4, "n": 90, "chance": 0.1}}}}}
    card = render_card(name="r", version="1", splits=["train", "test"], counts={}, config_hash="h", inputs={},
                       stats_files={}, bias=bias)
    assert ("| grounded | hallucination or not, voted by the questions of the same wording (every word outside a "
            "closed-class list masked; folds by image) | 87.0% | 1200 | 73.0% | at most chance + 5 points | no |") in card
    assert '| grounded | "A or B" questions answered by their first option | 52.0% | 310 | 50.0% | 35% - 65% | yes |' in card
    assert ("| template | the most common answer of the same masked question in the other folds (folds by image) | "
            "40.0% | 90 | 10.0% | - | n/a |") in card


def test_card_licenses_follow_the_sources_of_the_build():
    inputs = {"source:sa1b": "s1", "source:droid": "s2", "knowledge": "k", "source:no_such_plugin": "s3"}
    card = render_card(name="r", version="1", splits=["train"], counts={}, config_hash="h", inputs=inputs,
                       stats_files={})
    licenses = card[card.index("## Licenses"):]
    assert "| `droid` | DROID raw episodes: keyframes of the MP4 recordings, language instructions as context | CC BY 4.0 |" in licenses
    assert "| SA-1B Dataset Research License (research use) |" in licenses
    assert "| `no_such_plugin` | (source not installed here) | see the source dataset |" in licenses
    assert "Visual Genome" not in licenses and "Landmarks" not in licenses
    assert licenses.index("`droid`") < licenses.index("`no_such_plugin`") < licenses.index("`sa1b`")
