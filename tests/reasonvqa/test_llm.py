import json

import pytest

from reasonvqa.call_cache import CallCache
from reasonvqa.llm import LLMClient, LLMConfig, LLMEndpointError, export_batch, import_batch, parse_json_output

from tests.tasks.verify.llm_server import FixtureLLM

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("text, expected", [
    ('{"qa": [1]}', {"qa": [1]}),
    ('Sure! Here you go:\n```json\n{"qa": [{"question": "Q"}]}\n```\nEnjoy.', {"qa": [{"question": "Q"}]}),
    ('The pairs: [1, 2] and more', [1, 2]),
    ('{"qa": [{"question": "Q", "answer": "trunc', None),
    ('no json at all', None), ("", None), (None, None),
    ('{broken} then {"ok": true}', {"ok": True}),
])
def test_parse_json_output_is_defensive(text, expected):
    assert parse_json_output(text) == expected


def _config(server, **kw):
    return LLMConfig(base_url=server.base_url, model="fixture-model", api_key_env="FIXTURE_KEY", max_retries=2,
                     backoff_seconds=0.01, concurrency=3, **kw)


def test_complete_many_caches_every_response_by_request(tmp_path, monkeypatch):
    monkeypatch.setenv("FIXTURE_KEY", "sk-test")
    conversations = [[{"role": "user", "content": f"caption {i}"}] for i in range(5)]
    with FixtureLLM(generations={f"caption {i}": f'{{"n": {i}}}' for i in range(5)}) as server:
        client = LLMClient(_config(server))
        cache = CallCache(tmp_path / "calls.jsonl")
        first = client.complete_many(conversations, cache)
        assert first == [f'{{"n": {i}}}' for i in range(5)]
        assert len(server.requests) == 5
        body = server.requests[0]
        assert body["model"] == "fixture-model" and body["temperature"] == 0.0 and body["seed"] == 0
        assert body["response_format"] == {"type": "json_object"}
        again = LLMClient(_config(server)).complete_many(conversations, CallCache(tmp_path / "calls.jsonl"))
        assert again == first and len(server.requests) == 5  # a rerun costs nothing
        changed = LLMClient(_config(server, temperature=0.7)).complete_many(conversations[:1], cache)
        assert changed == first[:1] and len(server.requests) == 6  # parameters are part of the key


def test_json_schema_goes_into_response_format_and_the_key():
    schema = {"type": "object", "required": ["qa"]}
    plain = LLMClient(LLMConfig()).request([{"role": "user", "content": "x"}])
    constrained = LLMClient(LLMConfig(json_schema=schema)).request([{"role": "user", "content": "x"}])
    assert plain["response_format"] == {"type": "json_object"}  # no schema: the body (and key) as before
    assert constrained["response_format"] == {"type": "json_object", "schema": schema}
    assert "response_format" not in LLMClient(LLMConfig(json_mode=False, json_schema=schema)).request([])


def test_failing_endpoint_fails_after_bounded_retries_and_keeps_the_cache(tmp_path):
    cache = CallCache(tmp_path / "calls.jsonl")
    with FixtureLLM(generations={"ok": '{"fine": 1}'}) as server:
        client = LLMClient(_config(server))
        assert client.complete_many([[{"role": "user", "content": "ok"}]], cache) == ['{"fine": 1}']
        server.fail_status = 503
        with pytest.raises(LLMEndpointError, match="InternalServerError after 3 attempts"):
            client.complete_many([[{"role": "user", "content": "other"}]], cache)
        assert len(server.requests) == 1 + 3
        server.fail_status = 400
        with pytest.raises(LLMEndpointError, match="BadRequestError"):
            client.complete_many([[{"role": "user", "content": "other"}]], cache)
        assert len(server.requests) == 1 + 3 + 1  # a 4xx is not retried
    reloaded = CallCache(tmp_path / "calls.jsonl")
    assert len(reloaded) == 1


def test_batch_export_and_import_fill_the_cache(tmp_path):
    with FixtureLLM() as server:
        client = LLMClient(_config(server))
        cache = CallCache(tmp_path / "calls.jsonl")
        conversations = [[{"role": "user", "content": f"p{i}"}] for i in range(3)]
        assert export_batch(client, conversations, cache, tmp_path / "batch.jsonl") == 3
        lines = [json.loads(line) for line in (tmp_path / "batch.jsonl").read_text().splitlines()]
        assert {line["url"] for line in lines} == {"/v1/chat/completions"} and lines[0]["body"]["model"] == "fixture-model"
        results = [{"custom_id": line["custom_id"], "error": None,
                    "response": {"status_code": 200, "body": {"choices": [{"message": {"content": line["body"]["messages"][0]["content"].upper()}}]}}}
                   for line in lines[:2]]
        results.append({"custom_id": lines[2]["custom_id"], "error": {"message": "expired"}, "response": None})
        results.append({"custom_id": "nope", "error": None, "response": {"status_code": 200}})
        (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
        counts = import_batch(tmp_path / "batch.jsonl", tmp_path / "results.jsonl", cache)
        assert counts == {"imported": 2, "failed": 1, "unknown": 1}
        assert export_batch(client, conversations, cache, tmp_path / "batch2.jsonl") == 1  # only the failed one is left
        imported = sorted(line["body"]["messages"][0]["content"] for line in lines[:2])
        replies = client.complete_many([[{"role": "user", "content": c}] for c in imported], cache)
        assert replies == [c.upper() for c in imported] and server.requests == []


def test_429_waits_retry_after_then_succeeds(tmp_path):
    with FixtureLLM(generations={"ok": '{"fine": 1}'}) as server:
        server.failures = [(429, {"Retry-After": "1"})]
        client = LLMClient(_config(server))  # backoff 0.01 s: only Retry-After explains a 1 s wait
        replies = client.complete_many([[{"role": "user", "content": "ok"}]], CallCache(tmp_path / "calls.jsonl"))
        assert replies == ['{"fine": 1}']
        assert len(server.requests) == 2 and client.retries == 1
        first, second = server.arrivals
        assert second - first >= 1.0


def test_retry_after_ms_is_waited_and_a_too_long_wait_fails_at_once(tmp_path):
    cache = CallCache(tmp_path / "calls.jsonl")
    with FixtureLLM(generations={"ok": '{"fine": 1}'}) as server:
        server.failures = [(503, {"retry-after-ms": "300"})]
        client = LLMClient(_config(server))
        assert client.complete_many([[{"role": "user", "content": "ok"}]], cache) == ['{"fine": 1}']
        first, second = server.arrivals
        assert second - first >= 0.3
        server.failures = [(429, {"Retry-After": "3600"})]
        with pytest.raises(LLMEndpointError, match=r"asked to wait 3600 s .*RateLimitError.*max_retry_after_s=300"):
            client.complete_many([[{"role": "user", "content": "other"}]], cache)
        assert len(server.requests) == 3  # no retry was sent
