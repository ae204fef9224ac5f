"""Knowledge over SPARQL: VALUES batching vs one query per entity (``batching``, the default mode), and the
embedded mirror at rehearsal scale, its store build and the facts stage's queries against it (``mirror``).

    python -m benchmarks.bench_sparql_batching [batching] [--sizes 100,1000] [--batch 200]
    python -m benchmarks.bench_sparql_batching mirror --scale 0.01|0.1 [--inputs DIR] [--items N]

``batching``: requests and wall time of multi-hop fact retrieval.
Runs against a real ``oxigraph serve-read-only`` on 127.0.0.1 serving the bundled sample
knowledge (the embedded mirror), over HTTP through ``WikidataClient`` with the cache off,
so every query is a real request. The per-entity baseline is the same code with
``batch_size=1``. N linked items = the items the bundled sample images link to, padded
with further real items (P8814-only, linked but without facts) up to N.
Both runs must return identical facts; the batched run must use ceil(subjects / batch)
queries per hop.

``mirror``: inputs: the rehearsal's Wikidata JSON-lines dump (``reasonvqa/rehearsal_inputs.py``, written once
and reused).
1. ``build_store`` on the dump in a fresh folder (its report's mapping and load seconds), next to its floor in
   the same run: Oxigraph's bulk load of the same N-Triples alone.
2. ``fetch_facts`` (default config and the template bank's properties) for the dump's first N items, twice on
   one served mirror: every query over HTTP to ``oxigraph serve-read-only`` (the path before, and still the path
   of a mirror served by another process), then through ``StatementsClient`` (statements from the store by index
   look-ups, the rest over HTTP: the facts stage's path now). Both must give the same facts, rejects and rows in.
   CPU is this process's; the server's is not in it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, TypeVar

from benchmarks import measure
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.entity_dump import read_entities
from reasonvqa.knowledge.facts import fetch_facts
from reasonvqa.knowledge.ids import id_sort_key
from reasonvqa.knowledge.linking import link_synset_names
from reasonvqa.knowledge.lookups import items_for_commons_categories, normalize_category
from reasonvqa.knowledge.mirror import build_store, bulk_load, serve_mirror, write_ntriples
from reasonvqa.knowledge.mirror_statements import StatementsClient
from reasonvqa.knowledge.wikidata import WikidataClient
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.rehearsal_inputs import make_rehearsal_inputs
from reasonvqa.tasks.questions.bank import load_bank

# The 58 properties the sample knowledge and the template bank were built around.
PROPERTIES = (
    "P17 P131 P30 P36 P37 P38 P84 P2048 P2049 P2043 P2044 P571 P1082 P2046 P6 P35 P47 P421 P149 P186 P127 P138 "
    "P361 P1435 P4552 P610 P706 P2660 P88 P1619 P122 P463 P85 P25 P22 P26 P19 P20 P569 P570 P27 P106 P50 P170 "
    "P279 P31 P527 P366 P176 P495 P61 P575 P171 P141 P2067 P462 P641 P136"
).split()
T = TypeVar("T")


def linked_items(endpoint: str, config: KnowledgeConfig, n: int) -> list[str]:
    """N real item ids: first the items the bundled sample images link to (Visual Genome
    synsets and GLDv2 categories, linked through the mirror), then further real items that
    only carry P8814 (linked, but without facts), up to N."""
    client = WikidataClient(endpoint, config, cache=None)
    objects = json.loads((SAMPLE_DIR / "vg" / "objects.json").read_text())
    synsets = sorted({s for image in objects for o in image["objects"] for s in o.get("synsets", [])})
    seeds = {r["qid"] for r in link_synset_names(synsets, config, client=client) if r["qid"]}
    with open(SAMPLE_DIR / "gldv2" / "train_label_to_category.csv", newline="") as handle:
        names = [normalize_category(r["category"].split("/wiki/", 1)[1]) for r in csv.DictReader(handle)]
    seeds |= {m.qid for m in items_for_commons_categories([x for x in names if x], client, config.batch_size).values()}
    entities = read_entities(config.mirror_entities).entities
    padding = (q for q in sorted(entities, key=id_sort_key) if q[0] == "Q" and set(entities[q]["claims"]) == {"P8814"})
    ordered = sorted(seeds, key=id_sort_key)
    for qid in padding:
        if len(ordered) >= n:
            break
        if qid not in seeds:
            ordered.append(qid)
    return ordered[:n]


def run(endpoint: str, config: KnowledgeConfig, qids: list[str], batch_size: int) -> dict:
    client = WikidataClient(endpoint, config.model_copy(update={"batch_size": batch_size}), cache=None)
    start = time.perf_counter()
    result = fetch_facts(qids, client, client.config, PROPERTIES, shard=0)
    seconds = time.perf_counter() - start
    return {"result": result, "seconds": seconds, "requests": client.requests}


def batching(args: argparse.Namespace) -> None:
    config = KnowledgeConfig()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}; "
          f"oxigraph serve-read-only on 127.0.0.1, HTTP via SPARQLWrapper, cache off\n")
    print("| N linked | subjects per hop (1/2/3) | labels asked | batched (batch=%d): requests per hop + labels = total | batched s | per-entity: requests per hop + labels = total | per-entity s | speed-up |" % args.batch)
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work, serve_mirror(config.mirror_entities, Path(work)) as endpoint:
        run(endpoint, config, linked_items(endpoint, config, 10), args.batch)  # warm-up
        for n in sizes:
            qids = linked_items(endpoint, config, n)
            batched = run(endpoint, config, qids, args.batch)
            single = run(endpoint, config, qids, 1)
            b, s = batched["result"], single["result"]
            assert b.outputs["facts"].equals(s.outputs["facts"]), "batched and per-entity answers differ"
            subjects = b.extra["subjects_by_hop"]
            hops = [subjects.get(str(h), 0) for h in (1, 2, 3)]
            labels_asked = s.extra["requests_by_hop"]["labels"]  # batch 1: one label query per item
            expected = [math.ceil(x / args.batch) for x in hops]
            per_hop_b = [b.extra["requests_by_hop"].get(str(h), 0) for h in (1, 2, 3)]
            per_hop_s = [s.extra["requests_by_hop"].get(str(h), 0) for h in (1, 2, 3)]
            assert per_hop_b == expected, (per_hop_b, expected)
            print(
                f"| {n} | {'/'.join(map(str, hops))} | {labels_asked} "
                f"| {'+'.join(map(str, per_hop_b))} + {b.extra['requests_by_hop']['labels']} = {batched['requests']} "
                f"| {batched['seconds']:.2f} "
                f"| {'+'.join(map(str, per_hop_s))} + {labels_asked} = {single['requests']} "
                f"| {single['seconds']:.2f} | {single['seconds'] / batched['seconds']:.1f}x |"
            )
            print(f"<!-- N={n}: {b.outputs['facts'].num_rows} facts, {len(b.rejects)} rejects, identical in both runs -->")



def timed(work: Callable[[], T]) -> tuple[T, float, float]:
    """``work()``, its wall and CPU seconds (this process's)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, round(time.perf_counter() - wall, 2), round(time.process_time() - cpu, 2)


def mirror_facts(args: argparse.Namespace) -> None:
    dump = make_rehearsal_inputs(args.inputs / f"scale-{args.scale:g}", args.scale).folder / "entities" / "rehearsal.jsonl"
    load_before = measure.load_average()
    scratch = Path(tempfile.mkdtemp(prefix="bench-mirror-facts-"))
    try:
        location, wall, cpu = timed(lambda: build_store(dump, scratch / "store"))
        report = json.loads((scratch / "store" / "build_report.json").read_text())
        write_ntriples(dump, scratch / "floor.nt")
        _, floor_wall, floor_cpu = timed(lambda: bulk_load(scratch / "floor.nt", scratch / "floor-store"))
        mirror = {"entities": report["entities"], "statements": report["statements"], "wall_s": wall, "cpu_s": cpu,
                  **report["seconds"], "floor_load_wall_s": floor_wall, "floor_load_cpu_s": floor_cpu}

        with dump.open("rb") as handle:
            items = sorted((json.loads(line)["id"] for line in handle), key=id_sort_key)
        items = [q for q in items if q.startswith("Q")][: args.items or None]
        config, properties = KnowledgeConfig(), load_bank().property_ids(None)
        with serve_mirror(dump, scratch / "work", location=location) as endpoint:
            http = WikidataClient(endpoint, config, None)
            http.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")  # warm-up
            before, http_wall, http_cpu = timed(lambda: fetch_facts(items, http, config, properties, 0))
            direct = StatementsClient(WikidataClient(endpoint, config, None), location)
            after, direct_wall, direct_cpu = timed(lambda: fetch_facts(items, direct, config, properties, 0))
        assert before.outputs["facts"].equals(after.outputs["facts"]), "the two paths gave different facts"
        assert before.rejects.rows == after.rejects.rows and before.rows_in == after.rows_in
        facts = {"items": len(items), "facts": after.outputs["facts"].num_rows, "rows_in": after.rows_in,
                 "queries": before.requests, "from_store": direct.answered,
                 "http": {"wall_s": http_wall, "cpu_s": http_cpu},
                 "store": {"wall_s": direct_wall, "cpu_s": direct_cpu},
                 "speed_up": round(http_wall / max(direct_wall, 1e-9), 1)}
        print(json.dumps({"scale": args.scale, "load_before": load_before, "load_after": measure.load_average(),
                          "mirror": mirror, "facts": facts}, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    modes = parser.add_subparsers(dest="mode", metavar="{batching,mirror}")
    one = modes.add_parser("batching", help="VALUES batches vs one query per entity (the default)")
    one.add_argument("--sizes", default="100,1000", help="comma-separated N (linked items)")
    one.add_argument("--batch", type=int, default=200)
    one.set_defaults(run=batching)
    store = modes.add_parser("mirror", help="the embedded mirror at rehearsal scale: store build, facts")
    store.add_argument("--scale", type=float, default=0.01)
    store.add_argument("--inputs", type=Path, default=Path(tempfile.gettempdir()) / "reasonvqa-rehearsal")
    store.add_argument("--items", type=int, default=0, help="items asked for (0: every item of the dump)")
    store.set_defaults(run=mirror_facts)
    args = parser.parse_args(measure.mode_argv(argv, modes.choices, "batching"))
    args.run(args)


if __name__ == "__main__":
    main()
