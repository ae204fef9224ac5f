"""A client for any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, Ollama, hosted APIs).

Through the ``openai`` package. The key comes from the environment variable named in the config
(never from the config or the release). Every response is cached by the hash of the request
(model, messages, parameters) in a ``CallCache``, so a rerun makes no calls and yields the same
bytes. Calls run with bounded concurrency; transient failures (connection errors, timeouts, 429,
5xx) are retried under the one retry policy of ``reasonvqa/retry.py`` (the server's ``Retry-After``
/ ``retry-after-ms`` waited, else exponential backoff with jitter; the SDK's own retries are off so
that one policy decides), and a failing endpoint raises ``LLMEndpointError`` after ``max_retries``
retries (what was cached stays cached). Batch APIs: ``export_batch`` writes the
uncached requests as batch JSONL, ``import_batch`` puts a batch's results into the cache.
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.call_cache import CallCache, canonical_key
from reasonvqa.retry import Retrier, RetriesExhausted, Retryable, RetryPolicy, WaitTooLong, retry_after_from_headers

NAMESPACE = "chat"


class LLMConfig(BaseModel):
    """Endpoint, model and sampling parameters of the LLM client."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "gpt-4o"
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Name of the environment variable holding the key.")
    temperature: float = 0.0
    max_tokens: int = Field(default=4096, ge=1)
    seed: int | None = 0
    json_mode: bool = Field(default=True, description='Ask for response_format {"type": "json_object"}.')
    json_schema: dict[str, Any] | None = Field(default=None, description="With json_mode, a JSON schema sent as "
                                               'response_format {"type": "json_object", "schema": ...} (llama.cpp '
                                               "server: grammar-constrained output); None sends no schema.")
    concurrency: int = Field(default=4, ge=1)
    max_retries: int = Field(default=4, ge=0)
    backoff_seconds: float = Field(default=1.0, ge=0, description="First retry delay without a Retry-After; "
                                   "doubles per retry, capped at 60 s (reasonvqa/retry.py).")
    timeout_seconds: float = Field(default=120.0, gt=0)


class LLMEndpointError(RuntimeError):
    """The endpoint kept failing (or refused the request) after bounded retries."""


def parse_json_output(text: str | None) -> Any:
    """The first JSON object or array in an LLM's reply; ``None`` when there is none.

    Tolerates code fences and prose around the JSON; a truncated or broken value gives ``None``.
    """
    if not text:
        return None
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for match in re.finditer(r"[\[{]", candidate):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except ValueError:
                continue
            return value
    return None


class LLMClient:
    """Cached, retried, bounded-concurrency chat completions (see the module docstring)."""

    def __init__(self, config: LLMConfig) -> None:
        import openai  # the [llm] extra

        self.config = config
        self._openai = openai
        self.client = openai.OpenAI(base_url=config.base_url, api_key=os.environ.get(config.api_key_env) or "none",
                                    max_retries=0, timeout=config.timeout_seconds)
        self.calls = 0
        self._retrier = Retrier(RetryPolicy(config.max_retries + 1, config.backoff_seconds), name=f"LLM {config.base_url}")

    @property
    def retries(self) -> int:
        """Retries made (calls beyond the first of each request)."""
        return self._retrier.retries

    def request(self, messages: list[dict]) -> dict:
        """The full request body: what the cache key and a batch line are made of."""
        body: dict[str, Any] = {"model": self.config.model, "messages": messages,
                                "temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        if self.config.json_mode:
            body["response_format"] = {"type": "json_object"}
            if self.config.json_schema is not None:
                body["response_format"]["schema"] = self.config.json_schema
        return body

    def _complete(self, body: dict) -> str:
        errors = self._openai
        transient = (errors.APIConnectionError, errors.APITimeoutError, errors.RateLimitError, errors.InternalServerError)

        def attempt() -> str:
            try:
                self.calls += 1
                response = self.client.chat.completions.create(**body)
            except transient as exc:
                response_of = getattr(exc, "response", None)  # none for connection errors and timeouts
                raise Retryable(f"{type(exc).__name__}: {exc}", status=getattr(exc, "status_code", None),
                                retry_after=retry_after_from_headers(getattr(response_of, "headers", None),
                                                                     time.time())) from exc
            except errors.APIError as exc:  # 4xx other than 429: retrying cannot help
                raise LLMEndpointError(f"{self.config.base_url}: {type(exc).__name__}: {exc}") from exc
            return response.choices[0].message.content or ""

        try:
            return self._retrier.call(attempt)
        except RetriesExhausted as error:
            cause = error.last.__cause__
            raise LLMEndpointError(f"{self.config.base_url}: {type(cause).__name__} after {error.attempts} "
                                   f"attempts: {cause}") from cause
        except WaitTooLong as error:
            raise LLMEndpointError(f"{self.config.base_url}: {error}; giving up") from error.last.__cause__

    def complete_many(self, conversations: list[list[dict]], cache: CallCache) -> list[str]:
        """Replies to each conversation, from the cache or the endpoint, in input order."""
        bodies = [self.request(messages) for messages in conversations]
        if not bodies:
            return []

        def one(body: dict) -> str:
            return cache.call(NAMESPACE, body, lambda: self._complete(body))

        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            return list(pool.map(one, bodies))


def export_batch(client: LLMClient, conversations: list[list[dict]], cache: CallCache, path: Path) -> int:
    """Write the uncached requests as OpenAI batch JSONL (``custom_id`` = cache key); return how many."""
    lines = []
    for messages in conversations:
        body = client.request(messages)
        if cache.has(NAMESPACE, body):
            continue
        key = canonical_key(NAMESPACE, body)
        lines.append(json.dumps({"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body},
                                sort_keys=True))
    lines = sorted(set(lines))
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def import_batch(requests_path: Path, results_path: Path, cache: CallCache) -> dict[str, int]:
    """Put a batch's successful results into the cache; count imported, failed and unknown lines."""
    bodies = {}
    for line in Path(requests_path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            bodies[entry["custom_id"]] = entry["body"]
    counts = {"imported": 0, "failed": 0, "unknown": 0}
    for line in Path(results_path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        body = bodies.get(entry.get("custom_id"))
        response = entry.get("response") or {}
        if body is None:
            counts["unknown"] += 1
            continue
        if entry.get("error") or response.get("status_code") != 200:
            counts["failed"] += 1
            continue
        content = response["body"]["choices"][0]["message"].get("content") or ""
        cache.call(NAMESPACE, body, lambda: content)  # noqa: B023 (called at once)
        counts["imported"] += 1
    return counts


def judge_verdicts(value: Any, n: int) -> dict[int, Any]:
    """``{index: verdict}`` from a judge's JSON (``verdict`` text lower-cased, or ``entailed`` bool)."""
    items = value.get("judgements") if isinstance(value, dict) else value
    out: dict[int, Any] = {}
    if not isinstance(items, list):
        return out
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("index"), int) or not 1 <= item["index"] <= n:
            continue
        if "entailed" in item and isinstance(item["entailed"], bool):
            out[item["index"]] = item["entailed"]
        elif isinstance(item.get("verdict"), str):
            out[item["index"]] = item["verdict"].strip().lower()
    return out


TEXT_FLAWS = ("trivial", "incomplete", "unnatural")  # the text judge's named rejections (prompt judge_text)


def text_judge_reason(verdict: Any) -> str | None:
    """The reject reason of a text judge's verdict: None for "ok", ``judge_<flaw>`` for a named flaw,
    ``judge_no_verdict`` for anything else (missing, malformed, unknown)."""
    if verdict == "ok":
        return None
    return f"judge_{verdict}" if verdict in TEXT_FLAWS else "judge_no_verdict"
