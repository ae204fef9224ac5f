"""The LLM answer judge (VistaQA's S_a) against a replaying OpenAI-compatible server on 127.0.0.1."""

import pytest

from reasonvqa.call_cache import CallCache
from reasonvqa.llm import LLMClient, LLMConfig
from reasonvqa.tasks.evaluate.judge import JudgeItem, judge_answers, judge_answers_detailed, read_verdict

from tests.tasks.verify.llm_server import FixtureLLM

pytestmark = pytest.mark.integration

ITEMS = [
    JudgeItem("How many dogs are on the grass?", "Two dogs.", "There are 2 dogs.", task_type="counting", domain="outdoor"),
    JudgeItem("What color is the bus?", "Red.", "Blue."),
    JudgeItem("What does the sign say?", "STOP", "It says stop."),
    JudgeItem("Is there a cat?", "No, there is no cat.", "Yes."),
]
REPLIES = {
    "Predicted answer: There are 2 dogs.": '{"correct": 1, "reason": "2 equals two."}',
    "Predicted answer: Blue.": '```json\n{"correct": 0, "reason": "wrong color"}\n```',
    "Predicted answer: It says stop.": "I believe the answer is correct.",  # no JSON: no verdict
    "Predicted answer: Yes.": '{"correct": 2, "reason": "?"}',  # out of the rubric's range
}


def _client(server):
    return LLMClient(LLMConfig(base_url=server.base_url, model="judge-fixture", api_key_env="FIXTURE_KEY",
                               max_retries=1, backoff_seconds=0.01, concurrency=2))


def test_scores_follow_the_verdicts_and_broken_verdicts_fail_and_are_named(tmp_path):
    with FixtureLLM(generations=REPLIES) as server:
        result = judge_answers_detailed(_client(server), ITEMS, CallCache(tmp_path / "judge.jsonl"))
        prompts = [body["messages"][-1]["content"] for body in server.requests]
    assert result.scores == [1.0, 0.0, 0.0, 0.0]
    assert result.reasons == ["2 equals two.", "wrong color", None, "?"]
    assert sorted(result.errors) == [2, 3]
    assert result.errors[2].startswith("judge_no_verdict: 'I believe")
    assert result.errors[3] == "judge_no_verdict: '{\"correct\": 2, \"reason\": \"?\"}'"
    assert len(prompts) == 4  # one request per item
    first = next(p for p in prompts if "There are 2 dogs." in p)
    assert "Question: How many dogs are on the grass?" in first and "Reference answer: Two dogs." in first
    assert "Task type: counting" in first and "Domain: outdoor" in first and '"correct": 0 or 1' in first
    assert "Task type: unknown" in next(p for p in prompts if "Predicted answer: Blue." in p)


def test_a_second_run_on_the_same_cache_sends_no_request(tmp_path):
    with FixtureLLM(generations=REPLIES) as server:
        client = _client(server)
        first = judge_answers(client, ITEMS, CallCache(tmp_path / "judge.jsonl"))
        sent = len(server.requests)
        again = judge_answers(client, ITEMS, CallCache(tmp_path / "judge.jsonl"))  # reloaded from disk
        assert again == first == [1.0, 0.0, 0.0, 0.0]
        assert sent == 4 and len(server.requests) == 4
        judge_answers(client, ITEMS[:1])  # no cache given: a temporary one, so the request goes out again
        assert len(server.requests) == 5


@pytest.mark.parametrize("reply, verdict", [
    ('{"correct": 1}', (1.0, None)), ('{"correct": true, "reason": "ok"}', (1.0, "ok")),
    ('{"correct": 0, "reason": "no"}', (0.0, "no")), ('{"correct": "1"}', (None, None)),
    ('{"correct": 0.5}', (None, None)), ('[1]', (None, None)), ("", (None, None)),
])
def test_verdicts_are_read_strictly(reply, verdict):
    assert read_verdict(reply) == verdict
