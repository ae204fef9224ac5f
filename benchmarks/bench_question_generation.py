"""Benchmark: templated question generation at ReasonVQA scale (about 600K images, 4M questions).

Writes a synthetic build (reasonvqa/synthetic_build.py) into benchmarks/_tmp/questions/ (images, objects,
relations, entity links, facts as Parquet, in the record model): 450K landmark photos of 150K landmarks and 150K
Visual Genome-like scenes of 20 objects over 2,000 concept items, with countries, cities and
people reached at hops 2-3. Fact densities are chosen so that the candidates come to about
ReasonVQA's size. Then, each in a fresh interpreter measured by benchmarks/measure.py (wall, CPU and
the peak RSS of its process tree):

* ``vectorized`` (the generation code alone): ``build_index`` once, then ``generate_questions`` over
  in-memory shards of ``--shard-size`` images (no Parquet, no Prefect), in ``--workers`` spawned
  processes (default 2, each loading the inputs and building the index; ``--workers 1``: one
  process, the code's own CPU cost per question);
* ``flow`` (what ``reasonvqa build`` runs): the same data written as source and link shards, then
  the stage runner's ``run_stage(QuestionsStage, ...)`` (one ``questions-shard`` Prefect task per shard: Parquet in, Parquet out) inside a
  flow on the CLI's default task runner, against a Prefect API started first (not timed);
* ``baseline``: a straightforward per-question Python implementation of the same steps (dicts,
  loops, ``random.Random`` per question) over the first ``--baseline-images`` images; its fact
  indexing is timed in full and its per-image time is scaled to all images.

Reports questions per second, total seconds, peak RSS, the ratio to the baseline and the load average.
A/B of the vectorized run against another checkout: ``python -m benchmarks.measure --baseline CHECKOUT --
python -m benchmarks.bench_question_generation --mode vectorized --scale 0.05`` (after one default run made the data).
Run: ``python -m benchmarks.bench_question_generation`` (``--scale 0.05`` for a quick run);
``--mode workers --repeats 3``: 1 process vs ``--workers`` processes alternating, outputs asserted
identical (sha256 of every shard's question rows).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import measure
from reasonvqa.synthetic_build import load_synthetic, make_synthetic

TMP = Path(__file__).resolve().parent / "_tmp" / "questions"
def _rss_mb() -> float:
    """Current resident set size (VmRSS) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


_SHARED: dict = {}  # the loaded tables and index, inherited by forked shard workers


def _shard_job(shard: int) -> tuple[int, int, int, str]:
    """Generate one shard from the inherited tables; (questions, candidates, rejects, sha256 of its rows)."""
    import hashlib

    from reasonvqa.tasks.questions.templated import generate_questions

    tables, index, bank, config, image_ids, keys, shard_size = (_SHARED[k] for k in (
        "tables", "index", "bank", "config", "image_ids", "keys", "shard_size"))
    lo = shard * shard_size
    first, last = image_ids[lo], image_ids[min(lo + shard_size, len(image_ids)) - 1]
    part = {"images": tables["images"].slice(lo, shard_size)}
    for name, col in keys.items():
        a, b = np.searchsorted(col, first, "left"), np.searchsorted(col, last, "right")
        part[name] = tables[name].slice(a, b - a)
    result = generate_questions(**part, facts=tables["facts"], bank=bank, config=config, seed=0, shard=shard,
                                knowledge_snapshot="synthetic", index=index)
    rows = result.outputs["questions"]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as writer:
        writer.write_table(rows)
    digest = hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()
    return rows.num_rows, result.rows_in, len(result.rejects), digest


def _load_shared(folder: Path, shard_size: int) -> float:
    """Load the inputs and build the index into _SHARED (in each worker process); the index seconds."""
    from reasonvqa.tasks.questions.bank import load_bank
    from reasonvqa.tasks.questions.config import QuestionConfig
    from reasonvqa.tasks.questions.index import build_index

    tables = load_synthetic(folder)
    bank, config = load_bank(), QuestionConfig()
    start = time.perf_counter()
    index = build_index(tables["facts"], bank, config)
    index_s = time.perf_counter() - start
    image_ids = tables["images"]["image_id"].to_numpy(zero_copy_only=False)
    keys = {name: tables[name]["image_id"].to_numpy(zero_copy_only=False) for name in ("objects", "relations", "links")}
    _SHARED.update(tables=tables, index=index, bank=bank, config=config, image_ids=image_ids, keys=keys,
                   shard_size=shard_size)
    return index_s


def run_vectorized(folder: Path, shard_size: int, workers: int = 1) -> dict:
    """Index once, then generate shard by shard (images sorted by id, as the flow shards them).

    ``workers`` > 1: the shards run in that many spawned processes (polars is not fork-safe), each
    loading the inputs and building the index once, one shard per task, results in shard order: what a
    process-based task runner does with the flow's question tasks. The time includes their start-up.
    """
    import multiprocessing

    start = time.perf_counter()
    cpu0 = time.process_time()
    if workers > 1:
        n_images = pq.ParquetFile(folder / "images.parquet").metadata.num_rows
        shards = range(-(-n_images // shard_size))
        context = multiprocessing.get_context("spawn")
        with context.Pool(workers, initializer=_load_shared, initargs=(folder, shard_size)) as pool:
            results = pool.map(_shard_job, shards, chunksize=1)
        index_s, loaded_rss, n_facts = None, None, pq.ParquetFile(folder / "facts.parquet").metadata.num_rows
    else:
        loaded_rss = _rss_mb()
        index_s = _load_shared(folder, shard_size)
        n_images, n_facts = len(_SHARED["image_ids"]), _SHARED["tables"]["facts"].num_rows
        results = [_shard_job(shard) for shard in range(-(-n_images // shard_size))]
    questions, candidates, rejected = (sum(r[i] for r in results) for i in range(3))
    total = time.perf_counter() - start
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"images": n_images, "facts": n_facts, "candidates": candidates, "questions": questions,
            "rejected": rejected, "index_s": index_s and round(index_s, 2), "total_s": round(total, 2), "workers": workers,
            "cpu_s": round(time.process_time() - cpu0 + children.ru_utime + children.ru_stime, 2),
            "own_peak_rss_mb": round(measure.own_peak_mb()),
            "rss_after_loading_inputs_mb": loaded_rss and round(loaded_rss),
            "output_sha256": hashlib.sha256("".join(r[3] for r in results).encode()).hexdigest()}


def write_flow_layout(folder: Path, shard_size: int) -> tuple[list, Path]:
    """The synthetic build as the flow's stages leave it: one source stage folder of Parquet shards
    (images, objects, relations) and the linking stage's ``entity_links`` shards, numbered alike."""
    from reasonvqa.stage import part_name, write_parquet
    from reasonvqa.shards import SourceShard

    root = folder / f"flow-{shard_size}"
    source_dir, link_dir = root / "source", root / "links"
    n_images = pq.ParquetFile(folder / "images.parquet").metadata.num_rows
    shards = [SourceShard(n, "synthetic", 0, n, source_dir) for n in range(-(-n_images // shard_size))]
    if not (root / "done").exists():
        tables = load_synthetic(folder)
        image_ids = tables["images"]["image_id"].to_numpy(zero_copy_only=False)
        keys = {name: tables[name]["image_id"].to_numpy(zero_copy_only=False) for name in ("objects", "relations", "links")}
        for shard in shards:
            lo = shard.number * shard_size
            first, last = image_ids[lo], image_ids[min(lo + shard_size, n_images) - 1]
            write_parquet(tables["images"].slice(lo, shard_size), shard.file("images"))
            for name, col in keys.items():
                a, b = np.searchsorted(col, first, "left"), np.searchsorted(col, last, "right")
                path = (link_dir / "entity_links" / f"{part_name(shard.number)}.parquet" if name == "links"
                        else shard.file(name))
                write_parquet(tables[name].slice(a, b - a), path)
        (root / "done").write_text("")
    return shards, link_dir


def run_flow(folder: Path, shard_size: int) -> dict:
    """The questions stage as ``reasonvqa build`` runs it: one ``questions-shard`` Prefect task per source
    shard (Parquet in, Parquet out, shared index per process) on the CLI's default task runner, inside
    a flow against a Prefect API started beforehand (its start is not timed)."""
    import tempfile

    from prefect import flow

    from reasonvqa.flows.runners import make_task_runner
    from reasonvqa.flows.stage_runner import local_slots, run_stage
    from reasonvqa.stage import summarize
    from reasonvqa.tasks.questions.questions_stage import QuestionsStage, QuestionsStageConfig
    from reasonvqa.prefect_api import local_prefect_api
    from reasonvqa.tasks.questions.config import QuestionConfig

    shards, link_dir = write_flow_layout(folder, shard_size)
    # `reasonvqa build` has imported the question modules before this stage (check_build_inputs loads the
    # template bank; importing inflect alone takes about 1.3 s), so the stage's time does not include that
    start = time.perf_counter()
    import reasonvqa.tasks.questions.shard  # noqa: F401
    import_s = time.perf_counter() - start

    @flow(name="bench-questions-stage")
    def questions_stage(out: Path) -> dict:
        config = QuestionsStageConfig(questions=QuestionConfig(), link_dir=link_dir, facts_path=folder / "facts.parquet",
                                      seed=0, knowledge_snapshot="synthetic")
        return summarize(run_stage(QuestionsStage, config, out, {s.number: s for s in shards}, in_flight=local_slots()))

    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with local_prefect_api(), tempfile.TemporaryDirectory(prefix="bench-questions-") as tmp:
        out = Path(tmp) / "questions"
        server0 = _children_cpu_s()
        start, cpu0 = time.perf_counter(), time.process_time()
        totals = questions_stage.with_options(task_runner=make_task_runner())(out)
        total, cpu = time.perf_counter() - start, time.process_time() - cpu0
        server_run_cpu = _children_cpu_s() - server0
        digest = hashlib.sha256()
        for path in sorted(out.glob("questions/part-*.parquet")) + sorted(out.glob("_rejects/part-*.parquet")):
            digest.update(path.read_bytes())
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = children.ru_utime + children.ru_stime - children0.ru_utime - children0.ru_stime
    return {"images": pq.ParquetFile(folder / "images.parquet").metadata.num_rows, "shards": len(shards),
            "candidates": totals["rows_in"], "questions": totals["rows_out"], "rejected": sum(totals["rejected"].values()),
            "total_s": round(total, 2), "cpu_s": round(cpu, 2), "api_server_cpu_s_with_its_start": round(server_cpu, 2),
            "api_server_cpu_s_during_run": round(server_run_cpu, 2),
            "own_peak_rss_mb": round(measure.own_peak_mb()),
            "question_modules_import_s_not_timed": round(import_s, 2), "load_average": os.getloadavg(), "output_sha256": digest.hexdigest()}


def _children_cpu_s() -> float:
    """CPU seconds so far of this process's live child processes (the Prefect API server) and theirs."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def run_baseline(folder: Path, n_images: int) -> dict:
    """The same steps, one question at a time in Python, over the first ``n_images`` images."""
    from reasonvqa.tasks.questions.bank import load_bank

    tables = load_synthetic(folder)
    bank = load_bank()
    start = time.perf_counter()
    ref = _Reference(tables["facts"].to_pylist(), bank)
    index_s = time.perf_counter() - start
    images = tables["images"]
    step = max(1, images.num_rows // n_images)  # a spread slice: both sources in their proportion
    wanted = set(images["image_id"].to_pylist()[::step][:n_images])
    rows = {name: [r for r in tables[name].to_pylist() if r["image_id"] in wanted] for name in ("objects", "relations", "links")}
    t1 = time.perf_counter()
    made = ref.generate(wanted, rows["objects"], rows["relations"], rows["links"])
    per_image = (time.perf_counter() - t1) / len(wanted)
    return {"images": len(wanted), "questions": made, "index_s": round(index_s, 2),
            "per_image_ms": round(per_image * 1000, 3), "est_total_s": round(index_s + per_image * images.num_rows, 1),
            "est_questions": round(made / len(wanted) * images.num_rows), "own_peak_rss_mb": round(measure.own_peak_mb())}


class _Reference:
    """Straightforward per-question implementation: dict lookups, loops, one RNG per question."""

    def __init__(self, facts: list[dict], bank):
        from reasonvqa.tasks.questions.bank import NAMING_PROPERTIES

        self.bank = bank
        self.by_subject: dict[str, dict[str, list[dict]]] = {}
        for f in facts:
            if f["property_id"] in bank.properties or f["property_id"] in NAMING_PROPERTIES:
                self.by_subject.setdefault(f["subject_qid"], {}).setdefault(f["property_id"], []).append(f)
        self.pools: dict[str, list[str]] = {}
        for f in facts:
            t = bank.properties.get(f["property_id"])
            if t is not None and t.category == "literal" and f["value_label"]:
                self.pools.setdefault(f["property_id"], set()).add(f["value_label"])
        self.pools = {p: sorted(v) for p, v in self.pools.items()}

    def name(self, qid: str, wordnet: bool, label: str) -> str:
        props = self.by_subject.get(qid, {})
        order = ("P279", "P31") if wordnet else ("P31", "P279")
        for p in order:
            values = sorted((f["value_label"] for f in props.get(p, []) if f["value_label"]),
                            key=lambda v: v in self.bank.naming_avoid)
            if values:
                return values[0]
        return label if wordnet else "landmark"

    def routes(self, qid: str, path: tuple = (), seen: tuple = ()):
        for pid, values in self.by_subject.get(qid, {}).items():
            t = self.bank.properties.get(pid)
            if t is None or pid in path:
                continue
            yield path + (pid,), values
            if len(path) < 2 and t.sub and len(values) == 1 and values[0]["value_qid"] not in seen + (qid,):
                yield from self.routes(values[0]["value_qid"], path + (pid,), seen + (qid,))

    def generate(self, images, objects, relations, links) -> int:
        labels = {o["object_id"]: o["label"] for o in objects}
        refs = []
        by_image: dict[str, dict[str, list]] = {}
        for link in links:
            name = self.name(link["qid"], link["method"].startswith("wordnet"), labels.get(link["object_id"], ""))
            by_image.setdefault(link["image_id"], {}).setdefault(name, []).append(link)
        for image_id, names in by_image.items():
            for name, group in names.items():
                if len({g["qid"] for g in group}) == 1:
                    refs.append((image_id, group[0]["qid"], f"this {name}", sorted(g["object_id"] for g in group)))
        linked = {link["object_id"]: link for link in links}
        for rel in relations:
            s = linked.get(rel["subject_id"])
            if s is not None:
                name = self.name(s["qid"], True, labels.get(s["object_id"], ""))
                refs.append((rel["image_id"], s["qid"], f"the {name} {rel['predicate']} the {rel['object_label']}",
                             sorted([rel["subject_id"], rel["object_id"]])))
        made = 0
        for image_id, qid, phrase, object_ids in refs:
            for route, values in self.routes(qid):
                key = "\x1f".join([image_id, ",".join(object_ids), ">".join(route), self.bank.version])
                digest = hashlib.blake2b(key.encode(), digest_size=18).digest()
                rng = random.Random(digest)
                text = "{subject}"
                for pid in route[:-1]:
                    text = self.bank.properties[pid].sub.replace("{subject}", text)
                text = self.bank.properties[route[-1]].main.replace("{subject}", text).replace("{subject}", phrase)
                question = text[0].upper() + text[1:]
                if len(values) != 1:
                    continue
                answer, distractors = self.choices(route[-1], values[0], rng)
                if answer and len(set(distractors)) == 3 and answer not in distractors:
                    choices = [answer, *distractors]
                    rng.shuffle(choices)
                    made += bool(question)
        return made

    def choices(self, pid: str, fact: dict, rng: random.Random):
        t = self.bank.properties[pid]
        if t.category == "number":
            a = fact["amount"]
            step = max(abs(a) * t.number.spread, 1)
            ks = rng.sample([k for k in range(-5, 6) if k and a + k * step > 0], 3)
            return f"{a:,.0f}", [f"{a + k * step:,.0f}" for k in ks]
        if t.category == "date":
            year = int(fact["time"][1:5])
            ks = rng.sample([k for k in range(-t.date.window_years, t.date.window_years + 1) if k], 3)
            return str(year), [str(year + k) for k in ks]
        pool = [c.label for c in t.choices] if t.category == "fixed" else self.pools.get(pid, [])
        others = [v for v in pool if v != fact["value_label"]]
        return fact["value_label"], rng.sample(others, 3) if len(others) >= 3 else []


def generated(mode: str, args, *options: str) -> dict:
    """One run of ``mode`` in a fresh interpreter, measured by benchmarks/measure.py: the run's own figures
    plus the wall and CPU seconds and the peak RSS of its process tree (``peak_rss_mb``)."""
    run = measure.run_once([sys.executable, "-m", "benchmarks.bench_question_generation", "--mode", mode, "--scale",
                            str(args.scale), "--shard-size", str(args.shard_size), *options], label=mode)
    return {**run.result, "peak_rss_mb": round(run.peak_mb), "process_tree_cpu_s": run.cpu_s, "wall_s": run.wall_s}


def main() -> None:
    parser = measure.parser(__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="share of the ReasonVQA-size image count")
    parser.add_argument("--shard-size", type=int, default=5000)
    parser.add_argument("--baseline-images", type=int, default=3000)
    parser.add_argument("--mode", choices=["all", "vectorized", "baseline", "workers", "flow"], default="all",
                        help="workers: the vectorized run with 1 and with --workers processes, alternating, and "
                             "their outputs compared (no baseline)")
    parser.add_argument("--workers", type=int, default=2, help="processes for the parallel vectorized run")
    args = parser.parse_args()
    folder = TMP / f"scale-{args.scale}"
    if args.mode in ("vectorized", "baseline"):
        result = (run_vectorized(folder, args.shard_size, args.workers) if args.mode == "vectorized"
                  else run_baseline(folder, args.baseline_images))
        measure.child_result(result)
        return
    if args.mode == "workers":
        compare_workers(folder, args)
        return
    if args.mode == "flow":
        make_synthetic(folder, args.scale)
        print(json.dumps(run_flow(folder, args.shard_size)))  # one process: run it under benchmarks.measure
        return
    t0 = time.perf_counter()
    make_synthetic(folder, args.scale)
    print(f"synthetic data ready in {time.perf_counter() - t0:.1f} s: {folder}")
    results = {}
    load_before = measure.load_average()
    for mode in ("vectorized", "baseline"):
        results[mode] = generated(mode, args, "--baseline-images", str(args.baseline_images))
        print(mode, results[mode])
    vec, base = results["vectorized"], results["baseline"]
    qps = vec["questions"] / vec["total_s"]
    base_qps = base["est_questions"] / base["est_total_s"]
    print(f"vectorized: {vec['questions']:,} questions from {vec['candidates']:,} candidates, {vec['images']:,} images in "
          f"{vec['total_s']} s ({qps:,.0f} questions/s, index {vec['index_s']} s), peak RSS {vec['peak_rss_mb']} MB "
          f"({vec['rss_after_loading_inputs_mb']} MB after loading all input tables)")
    print(f"baseline (scaled from {base['images']} images): {base['est_total_s']} s ({base_qps:,.0f} questions/s), "
          f"peak RSS {base['peak_rss_mb']} MB; speed-up x{base['est_total_s'] / vec['total_s']:.1f}")
    print(f"load average before {load_before}, after {measure.load_average()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def compare_workers(folder: Path, args) -> None:
    """One process vs ``--workers`` processes over the same shards, alternating; outputs must be identical."""
    import statistics

    make_synthetic(folder, args.scale)
    print(f"load average before: {measure.load_average()}", flush=True)
    runs: dict[int, list[dict]] = {1: [], args.workers: []}
    for rep in range(args.repeats):
        for workers in ((1, args.workers) if rep % 2 == 0 else (args.workers, 1)):
            result = generated("vectorized", args, "--workers", str(workers))
            runs[workers].append(result)
            print(f"workers={workers}: {result['questions']:,} questions in {result['total_s']} s "
                  f"({result['questions'] / result['total_s']:,.0f}/s), CPU {result['process_tree_cpu_s']} s, peak RSS "
                  f"{result['peak_rss_mb']} MB (the process tree's)", flush=True)
    digests = {r["output_sha256"] for rs in runs.values() for r in rs}
    if len(digests) != 1:
        raise AssertionError("the parallel run's questions differ from the serial run's")
    print(f"load average after: {measure.load_average()}")
    for workers, rs in runs.items():
        s = statistics.median(r["total_s"] for r in rs)
        print(f"workers={workers}: median {s:.1f} s, {rs[0]['questions'] / s:,.0f} questions/s")
    print("outputs identical (sha256 of every shard's questions, in shard order)")


if __name__ == "__main__":
    main()
