"""build-verified-qa's config for the offline run: llama.cpp's server over SmolLM2-135M on the VG sample.

Used by ``benchmarks/bench_verified_sandbox.py offline`` (docs/verified-qa.md, "Verified QA offline") and by its test
(tests/flows/test_build_verified_qa_offline.py).
"""

from __future__ import annotations

from reasonvqa.flows.build_verified_qa import GraphSource, VerifiedBuildConfig
from reasonvqa.llm import LLMConfig
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.tasks.verify.local_llm import MODEL_ALIAS
from reasonvqa.tasks.verify.sandbox import SandboxConfig
from reasonvqa.tasks.verify.verified import VerifiedQAConfig


# The generation reply's shape, enforced by llama.cpp's grammar: without it the 135M model writes
# valid JSON of any other shape (every reply of a first run was rejected as llm_broken_json); with the
# shape but no lengths it rambles inside one string until max_tokens cuts the reply.
QA_SCHEMA = {"type": "object", "required": ["qa"], "properties": {"qa": {
    "type": "array", "minItems": 1, "maxItems": 5, "items": {
        "type": "object", "required": ["question", "answer", "program"],
        "properties": {"question": {"type": "string", "maxLength": 120}, "answer": {"type": "string", "maxLength": 120},
                       "program": {"type": "string", "maxLength": 400}}}}}}


def offline_config(base_url: str, max_images: int | None, max_tokens: int, questions: str,
                   schema: bool = True) -> VerifiedBuildConfig:
    """The flow's config for the local server: the VG sample, one image a shard, one call at a time;
    the generation reply constrained to QA_SCHEMA (``schema``), the judges' replies to any JSON."""
    judge = LLMConfig(base_url=base_url, model=MODEL_ALIAS, api_key_env="OFFLINE_LLM_KEY", max_tokens=max_tokens,
                      concurrency=1, max_retries=1, backoff_seconds=0.1, timeout_seconds=300)
    llm = judge.model_copy(update={"json_schema": QA_SCHEMA if schema else None})
    return VerifiedBuildConfig(graphs=GraphSource(kind="vg", path=SAMPLE_DIR / "vg", max_images=max_images),
                               shard_size=1, verified=VerifiedQAConfig(
                                   llm=llm, judge_llm=judge, sandbox=SandboxConfig(workers=2),
                                   questions_per_image=questions))
