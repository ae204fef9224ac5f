"""The LLM prompts of verified QA, kept as files in ``templates/prompts/`` and versioned by content."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from string import Template

from reasonvqa.paths import TEMPLATES_DIR

PROMPTS_DIR = TEMPLATES_DIR / "prompts"
PROMPT_NAMES = ("generate_qa", "judge_text", "judge_entailment")


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Template:
    """The prompt file ``<name>.md`` as a ``string.Template`` (``$field`` placeholders)."""
    return Template((PROMPTS_DIR / f"{name}.md").read_text(encoding="utf-8"))


def prompt_versions() -> dict[str, str]:
    """sha256 (first 16 hex digits) of each prompt file: recorded in run stats and the manifest."""
    return {name: hashlib.sha256((PROMPTS_DIR / f"{name}.md").read_bytes()).hexdigest()[:16] for name in PROMPT_NAMES}


def render(name: str, **fields: object) -> list[dict]:
    """One user message with the prompt's placeholders filled (a missing field raises KeyError)."""
    return [{"role": "user", "content": load_prompt(name).substitute({k: str(v) for k, v in fields.items()})}]
