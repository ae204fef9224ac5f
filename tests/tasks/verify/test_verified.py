from reasonvqa.llm import judge_verdicts
from reasonvqa.tasks.verify.scene_graph import SceneGraph
from reasonvqa.tasks.verify.verified import mentioned_entities, proves_breakdown, question_id

GRAPH = SceneGraph("", {"dog": {"attributes": [], "relations_to": {"hot dog": ["near"]}}, "grass": {}})


def test_mentioned_entities_whole_words_longest_first():
    assert mentioned_entities(GRAPH, "Is the hot dog near the Dog?") == ["hot dog", "dog"]
    assert mentioned_entities(GRAPH, "What about the dogs and grassland?") == []
    assert mentioned_entities(GRAPH, "sg.get_attributes('grass')") == ["grass"]


def test_question_id_is_stable_and_depends_on_every_part():
    qid = question_id("vg:1", "Q?", "A.", "m")
    assert qid == question_id("vg:1", "Q?", "A.", "m") and len(qid) == 20
    assert len({qid, question_id("vg:2", "Q?", "A.", "m"), question_id("vg:1", "Q?", "A.", "n")}) == 3


def test_verdicts_read_defensively():
    reply = {"judgements": [{"index": 1, "verdict": " Trivial "}, {"index": 2, "entailed": False}, {"index": 9, "verdict": "ok"},
                            {"index": "3", "verdict": "ok"}, "junk"]}
    assert judge_verdicts(reply, 3) == {1: "trivial", 2: False}
    assert judge_verdicts(None, 3) == {} and judge_verdicts([{"index": 1, "verdict": "ok"}], 1) == {1: "ok"}


def test_proves_breakdown_matches_the_papers_shares():
    rejected = {"program_failed": 150, "program_rejected": 30, "llm_broken_json": 3, "semantic_mismatch": 98,
                "judge_trivial": 200, "near_duplicate": 100, "taboo_word": 59}
    b = proves_breakdown(1000, rejected)
    assert (b["program_failed"], b["wrong_answer"], b["passed_programmatic"], b["text_filtered"], b["kept"]) == (183, 98, 719, 359, 360)
    assert (b["program_failed_rate"], b["wrong_answer_rate"], b["text_filtered_rate"]) == (0.183, 0.098, 0.4993)
    assert proves_breakdown(0, {})["program_failed_rate"] is None


def test_a_repeated_pair_is_neither_a_program_failure_nor_a_text_filter():
    b = proves_breakdown(10, {"duplicate_pair": 3, "program_failed": 7})
    assert (b["duplicate_pairs"], b["program_failed"], b["passed_programmatic"], b["text_filtered"], b["kept"]) == (3, 7, 0, 0, 0)
