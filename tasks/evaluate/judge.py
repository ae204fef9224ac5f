"""The answer score S_a by an LLM judge (VistaQA, section 4.1 and the judge prompt of its appendix A.8).

VistaQA's S_a is binary: given the question, the ground-truth answer and the predicted answer (and
the task type and domain), a judge model (Qwen2.5-14B in the paper) returns ``{"correct": 0 or 1,
"reason": ...}`` under a seven-rule rubric (paraphrases and plural/singular accepted; incomplete, vague
or wrong object/attribute/count/text/relation rejected; exact counts; OCR ignoring case and minor
punctuation; hallucination questions need an "absent / cannot tell" answer; be strict). Our wording
of that rubric is ``templates/prompts/judge_answer.md``.

One request per item, through ``LLMClient.complete_many`` (bounded concurrency, retries, every reply
cached by its request). A reply is read strictly: one JSON object whose ``correct`` is 0 or 1 (or
true/false). Anything else scores 0 and is named in ``JudgeResult.errors``: a broken verdict is a
failed answer, never a silent one.
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from reasonvqa.call_cache import CallCache
from reasonvqa.llm import LLMClient, parse_json_output
from reasonvqa.templates.prompt_loader import render

JUDGE_PROMPT = "judge_answer"
NO_VERDICT = "judge_no_verdict"


@dataclass(frozen=True)
class JudgeItem:
    """One answer to judge; ``task_type`` and ``domain`` fill the rubric's context lines when known."""

    question: str
    reference: str
    prediction: str
    task_type: str = ""
    domain: str = ""


@dataclass
class JudgeResult:
    """Per item, in input order: ``scores`` (1.0 correct, 0.0 wrong or no verdict) and the judge's
    ``reasons``; ``errors`` maps the index of each item without a valid verdict to what was wrong."""

    scores: list[float]
    reasons: list[str | None]
    errors: dict[int, str] = field(default_factory=dict)


@contextmanager
def cache_or_temporary(cache: CallCache | None, name: str) -> Iterator[CallCache]:
    """``cache`` itself, or a cache in a temporary folder that is removed afterwards (the replies of one
    call are still shared: the same request twice goes out once)."""
    if cache is not None:
        yield cache
        return
    with tempfile.TemporaryDirectory(prefix="reasonvqa-evaluate-") as folder:
        with CallCache(Path(folder) / f"{name}.jsonl") as temporary:
            yield temporary


def judge_conversation(item: JudgeItem) -> list[dict]:
    """The single user message that asks for one item's verdict."""
    return render(JUDGE_PROMPT, question=item.question, reference=item.reference, prediction=item.prediction,
                  task_type=item.task_type or "unknown", domain=item.domain or "unknown")


def read_verdict(reply: str) -> tuple[float | None, str | None]:
    """(score, reason) of a judge reply; score None when the reply holds no valid verdict."""
    value: Any = parse_json_output(reply)
    if not isinstance(value, dict):
        return None, None
    correct = value.get("correct")
    reason = value.get("reason") if isinstance(value.get("reason"), str) else None
    if isinstance(correct, bool):
        return float(correct), reason
    if isinstance(correct, int) and correct in (0, 1):
        return float(correct), reason
    return None, reason


def judge_answers_detailed(client: LLMClient, items: Sequence[JudgeItem], cache: CallCache | None = None) -> JudgeResult:
    """Judge every item (see the module docstring); invalid verdicts score 0 and are listed in ``errors``."""
    with cache_or_temporary(cache, "judge") as calls:
        replies = client.complete_many([judge_conversation(item) for item in items], calls)
    result = JudgeResult(scores=[], reasons=[])
    for index, reply in enumerate(replies):
        score, reason = read_verdict(reply)
        if score is None:
            result.errors[index] = f"{NO_VERDICT}: {reply[:200]!r}"
            score = 0.0
        result.scores.append(score)
        result.reasons.append(reason)
    return result


def judge_answers(client: LLMClient, items: Sequence[JudgeItem], cache: CallCache | None = None) -> list[float]:
    """S_a per item (1.0 or 0.0, in input order); use ``judge_answers_detailed`` to report failed verdicts."""
    return judge_answers_detailed(client, items, cache).scores
