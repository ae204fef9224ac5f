"""The embedded mirror at rehearsal scale: building its store, and the facts stage's queries against it.

    python -m benchmarks.bench_mirror_facts --scale 0.01|0.1 [--inputs DIR] [--items N]

Inputs: the rehearsal's Wikidata JSON-lines dump (``reasonvqa/rehearsal_inputs.py``, written once and reused).
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
import json
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks import measure
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.facts import fetch_facts
from reasonvqa.knowledge.ids import id_sort_key
from reasonvqa.knowledge.mirror import build_store, bulk_load, serve_mirror, write_ntriples
from reasonvqa.knowledge.mirror_statements import StatementsClient
from reasonvqa.knowledge.wikidata import WikidataClient
from reasonvqa.rehearsal_inputs import make_rehearsal_inputs
from reasonvqa.tasks.questions.bank import load_bank


def timed(work) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, round(time.perf_counter() - wall, 2), round(time.process_time() - cpu, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--inputs", type=Path, default=Path(tempfile.gettempdir()) / "reasonvqa-rehearsal")
    parser.add_argument("--items", type=int, default=0, help="items asked for (0: every item of the dump)")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
