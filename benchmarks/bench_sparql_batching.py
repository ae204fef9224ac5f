"""Requests and wall time of multi-hop fact retrieval: VALUES batches vs one query per entity.

Runs against a real ``oxigraph serve-read-only`` on 127.0.0.1 serving the bundled sample
knowledge (the embedded mirror), over HTTP through ``WikidataClient`` with the cache off,
so every query is a real request. The per-entity baseline is the same code with
``batch_size=1``. N linked items = the items the bundled sample images link to, padded
with further real items (P8814-only, linked but without facts) up to N.
Both runs must return identical facts; the batched run must use ceil(subjects / batch)
queries per hop.

    python -m benchmarks.bench_sparql_batching [--sizes 100,1000] [--batch 200]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import tempfile
import time
from pathlib import Path

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.entity_dump import read_entities
from reasonvqa.knowledge.facts import fetch_facts
from reasonvqa.knowledge.ids import id_sort_key
from reasonvqa.knowledge.linking import link_synset_names
from reasonvqa.knowledge.lookups import items_for_commons_categories, normalize_category
from reasonvqa.knowledge.mirror import serve_mirror
from reasonvqa.knowledge.wikidata import WikidataClient
from reasonvqa.paths import SAMPLE_DIR

# The 58 properties the sample knowledge and the template bank were built around.
PROPERTIES = (
    "P17 P131 P30 P36 P37 P38 P84 P2048 P2049 P2043 P2044 P571 P1082 P2046 P6 P35 P47 P421 P149 P186 P127 P138 "
    "P361 P1435 P4552 P610 P706 P2660 P88 P1619 P122 P463 P85 P25 P22 P26 P19 P20 P569 P570 P27 P106 P50 P170 "
    "P279 P31 P527 P366 P176 P495 P61 P575 P171 P141 P2067 P462 P641 P136"
).split()


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000", help="comma-separated N (linked items)")
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
