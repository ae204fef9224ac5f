"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat completions API and replays
fixture responses (for the LLM client and the build-verified-qa tests).

Generation replies are literal texts, chosen by a marker (the caption) found in the prompt.
Judge replies are built per request from verdict maps keyed by question text (default: ok /
entailed), in the JSON shape the judge prompts ask for.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def text_of(content) -> str:
    """A message's text: the string, or the text parts of a multimodal content list (images skipped)."""
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")
    return content


def images_of(body: dict) -> list[str]:
    """The image URLs attached to a request's messages."""
    return [part["image_url"]["url"] for message in body["messages"] if isinstance(message["content"], list)
            for part in message["content"] if isinstance(part, dict) and part.get("type") == "image_url"]


class FixtureLLM:
    def __init__(self, generations: dict[str, str] | None = None, text_verdicts: dict[str, str] | None = None,
                 entailment: dict[str, bool] | None = None, fail_status: int | None = None) -> None:
        self.generations = generations or {}
        self.text_verdicts = text_verdicts or {}
        self.entailment = entailment or {}
        self.fail_status = fail_status
        self.requests: list[dict] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request, in order
        # answered first, one per request: (status, headers), e.g. (429, {"Retry-After": "1"})
        self.failures: list[tuple[int, dict[str, str]]] = []
        self._lock = threading.Lock()
        fixture = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fixture._lock:
                    fixture.requests.append(body)
                    fixture.arrivals.append(time.monotonic())
                    scripted = fixture.failures.pop(0) if fixture.failures else None
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                if scripted is not None:
                    status, headers = scripted
                    return self._send(status, {"error": {"message": "scripted failure", "type": "rate_limit"}}, headers)
                if fixture.fail_status is not None:
                    return self._send(fixture.fail_status, {"error": {"message": "fixture failure", "type": "server_error"}})
                content = fixture.reply(text_of(body["messages"][-1]["content"]))
                self._send(200, {"id": "chatcmpl-fixture", "object": "chat.completion", "created": 0, "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": content}}],
                                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply(self, prompt: str) -> str:
        pairs = re.findall(r"^\d+\. Question: (.*)$", prompt, flags=re.MULTILINE)
        if prompt.startswith("You will be provided with a list of question-answer pairs"):
            return json.dumps({"judgements": [{"index": n, "verdict": self.text_verdicts.get(q, "ok")}
                                              for n, q in enumerate(pairs, 1)]})
        if prompt.startswith("You will be given a description"):
            return json.dumps({"judgements": [{"index": n, "entailed": self.entailment.get(q, True)}
                                              for n, q in enumerate(pairs, 1)]})
        for marker, text in self.generations.items():
            if marker in prompt:
                return text
        return "I cannot help with that."

    def __enter__(self) -> "FixtureLLM":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
