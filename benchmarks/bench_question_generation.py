"""Benchmark: templated question generation at ReasonVQA scale (about 600K images, 4M questions).

Writes a synthetic build into benchmarks/_tmp/questions/ (images, objects, relations, entity
links, facts as Parquet, in the record model): 450K landmark photos of 150K landmarks and 150K
Visual Genome-like scenes of 20 objects over 2,000 concept items, with countries, cities and
people reached at hops 2-3. Fact densities are chosen so that the candidates come to about
ReasonVQA's size. Then, each in a fresh subprocess so that peak RSS is its own:

* ``vectorized`` (the generation code alone): ``build_index`` once, then ``generate_questions`` over
  in-memory shards of ``--shard-size`` images (no Parquet, no Prefect), in ``--workers`` spawned
  processes (default 2, each loading the inputs and building the index; ``--workers 1``: one
  process, the code's own CPU cost per question);
* ``flow`` (what ``reasonvqa build`` runs): the same data written as source and link shards, then
  ``run_questions`` (one ``questions-shard`` Prefect task per shard: Parquet in, Parquet out) inside a
  flow on the CLI's default task runner, against a Prefect API started first (not timed);
* ``baseline``: a straightforward per-question Python implementation of the same steps (dicts,
  loops, ``random.Random`` per question) over the first ``--baseline-images`` images; its fact
  indexing is timed in full and its per-image time is scaled to all images.

Reports questions per second, total seconds, peak RSS, and the ratio to the baseline.
Run: ``python -m benchmarks.bench_question_generation`` (``--scale 0.05`` for a quick run);
``--mode workers --repeat 3``: 1 process vs ``--workers`` processes alternating, outputs asserted
identical (sha256 of every shard's question rows).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

TMP = Path(__file__).resolve().parent / "_tmp" / "questions"
TABLES = ("images", "objects", "relations", "links", "facts")

CONTINENTS = ["Africa", "Antarctica", "Asia", "Europe", "North America", "South America", "Oceania"]
PREDICATES = ["on", "has", "wearing", "next to", "holding", "in", "behind", "parked on", "near", "of", "in front of",
              "above", "under", "holds", "sitting on", "standing on", "beside", "along", "covering", "with"]


def make_synthetic(folder: Path, scale: float = 1.0, seed: int = 0) -> None:
    """Write the synthetic tables (skipped when they exist for this scale)."""
    marker = folder / f"done-{scale}"
    if marker.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("done-*"):
        old.unlink()
    rng = np.random.default_rng(seed)
    n_country, n_city, n_person = 200, 20_000, 20_000
    n_landmark, n_concept = int(150_000 * scale), 2_000
    n_gld, n_vg = int(450_000 * scale), int(150_000 * scale)
    country = [f"Q{1_000_000 + i}" for i in range(n_country)]
    city = [f"Q{2_000_000 + i}" for i in range(n_city)]
    person = [f"Q{3_000_000 + i}" for i in range(n_person)]
    landmark = [f"Q{4_000_000 + i}" for i in range(n_landmark)]
    concept = [f"Q{5_000_000 + i}" for i in range(n_concept)]
    facts = _Facts(rng)

    # hop 1: landmarks
    classes = [f"landmark class {i}" for i in range(60)]
    facts.item(landmark, "P31", rng.integers(0, 60, n_landmark), [f"Q{6_000_000 + i}" for i in range(60)], classes, 1)
    some = rng.random(n_landmark) < 0.2  # a second, vague instance-of
    facts.item(np.array(landmark)[some], "P31", np.zeros(some.sum(), int), ["Q570116"], ["tourist attraction"], 1)
    facts.item(landmark, "P17", rng.integers(0, n_country, n_landmark), country, _labels("Country", n_country), 1)
    facts.item_share(landmark, 0.1, "P131", n_city, city, _labels("City", n_city), 1)
    facts.time_share(landmark, 0.35, "P571", 1000, 2020, 9, 1)
    facts.quantity_share(landmark, 0.2, "P2048", 5, 400, "Q11573", "metre", 1)
    facts.item_share(landmark, 0.1, "P84", n_person, person, _labels("Person", n_person), 1)
    materials = _labels("Material", 30)
    mat_ids = [f"Q{7_000_000 + i}" for i in range(30)]
    facts.item_share(landmark, 0.1, "P186", 30, mat_ids, materials, 1, second=0.3)
    # hop 1: Visual Genome concepts
    supers = [f"Q{6_100_000 + i}" for i in range(150)]
    facts.item(concept, "P279", rng.integers(0, 150, n_concept), supers, _labels("kind", 150), 1)
    facts.item_share(concept, 0.03, "P61", n_person, person, _labels("Person", n_person), 1)
    facts.time_share(concept, 0.05, "P575", 1500, 2000, 9, 1)
    facts.item_share(concept, 0.1, "P186", 30, mat_ids, materials, 1, second=0.3)
    facts.quantity_share(concept, 0.1, "P2067", 1, 5000, "Q11570", "kilogram", 1)
    # hops 2-3: countries, cities, people
    facts.item(country, "P36", np.arange(n_country), city, _labels("City", n_city), 2)
    facts.item(country, "P30", rng.integers(0, 7, n_country), [f"Q{8_000_000 + i}" for i in range(7)], CONTINENTS, 2)
    facts.item_share(country, 0.5, "P38", 60, [f"Q{8_100_000 + i}" for i in range(60)], _labels("Currency", 60), 2)
    # populations carry their P585 point in time, as Wikidata's do (a time-varying property needs it)
    facts.quantity_share(country, 1.0, "P1082", 100_000, 300_000_000, None, None, 2, "+2020-01-01T00:00:00Z")
    facts.item(city, "P17", np.arange(n_city) % n_country, country, _labels("Country", n_country), 3)
    facts.quantity_share(city, 1.0, "P1082", 1_000, 10_000_000, None, None, 3, "+2020-01-01T00:00:00Z")
    facts.time_share(person, 1.0, "P569", 1700, 1990, 11, 2)
    facts.item(person, "P27", rng.integers(0, n_country, n_person), country, _labels("Country", n_country), 2)
    facts.item_share(person, 0.5, "P19", n_city, city, _labels("City", n_city), 2)
    # typing facts that template subject types check (classes as in templates/classes.yaml; chains at hop 4)
    facts.item(country, "P31", np.zeros(n_country, int), ["Q6256"], ["country"], 2)
    facts.item(city, "P31", np.zeros(n_city, int), ["Q515"], ["city"], 3)
    facts.item(person, "P31", np.zeros(n_person, int), ["Q5"], ["human"], 2)
    landmark_classes = [f"Q{6_000_000 + i}" for i in range(60)]
    facts.item(landmark_classes, "P279", np.arange(60) % 3, ["Q41176", "Q12518", "Q8502"], ["building", "tower", "mountain"], 4)
    facts.item(supers, "P279", np.zeros(150, int), ["Q223557"], ["physical object"], 4)
    pq.write_table(facts.table(), folder / "facts.parquet")

    # images, objects, relations, links
    gld_ids = [f"gldv2:{i:016x}" for i in range(n_gld)]
    vg_ids = [f"vg:{i + 1}" for i in range(n_vg)]
    images = pl.DataFrame({"image_id": gld_ids + vg_ids, "source": ["gldv2"] * n_gld + ["vg"] * n_vg})
    per = 20
    obj_image = np.repeat(np.arange(n_vg), per)
    obj_concept = np.minimum(rng.zipf(1.3, n_vg * per) - 1, n_concept - 1)
    vg_objects = pl.DataFrame({"img": obj_image, "concept": obj_concept, "n": np.arange(n_vg * per)}).with_columns(
        image_id=pl.format("vg:{}", pl.col("img") + 1), object_id=pl.format("vg:{}/o{}", pl.col("img") + 1, pl.col("n")),
        label=pl.format("obj {}", pl.col("concept")),
    )
    gld_objects = pl.DataFrame({"image_id": gld_ids}).with_columns(
        object_id=pl.col("image_id") + "/o0", label=pl.lit("landmark photo")
    )
    objects = pl.concat([gld_objects.select("object_id", "image_id", "label"), vg_objects.select("object_id", "image_id", "label")])
    linked = vg_objects.filter(pl.col("concept") < int(n_concept * 0.7))
    links = pl.concat([
        gld_objects.select("object_id", "image_id", qid=pl.Series([landmark[i % n_landmark] for i in range(n_gld)]),
                           method=pl.lit("commons:p373"), synset=pl.lit(None, pl.String)),
        linked.select("object_id", "image_id", qid=pl.format("Q{}", pl.col("concept") + 5_000_000),
                      method=pl.lit("wordnet:p8814"), synset=pl.format("thing{}.n.01", pl.col("concept"))),
    ])
    n_rel = 6
    rel_image = np.repeat(np.arange(n_vg), n_rel)
    subj = rel_image * per + rng.integers(0, per, n_vg * n_rel)
    obj = rel_image * per + rng.integers(0, per, n_vg * n_rel)
    relations = pl.DataFrame({"img": rel_image, "s": subj, "o": obj, "k": np.arange(n_vg * n_rel),
                              "predicate": np.array(PREDICATES)[rng.integers(0, len(PREDICATES), n_vg * n_rel)],
                              "oc": obj_concept[obj]}).select(
        relation_id=pl.format("vg:{}/r{}", pl.col("img") + 1, pl.col("k")), image_id=pl.format("vg:{}", pl.col("img") + 1),
        subject_id=pl.format("vg:{}/o{}", pl.col("img") + 1, pl.col("s")),
        object_id=pl.format("vg:{}/o{}", pl.col("img") + 1, pl.col("o")), predicate="predicate",
        object_label=pl.format("obj {}", pl.col("oc")),
    )
    for name, df in (("images", images), ("objects", objects), ("relations", relations), ("links", links)):
        df.sort("image_id").write_parquet(folder / f"{name}.parquet")
    marker.write_text("")


def _labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix} {i}" for i in range(n)]


class _Facts:
    """Accumulates fact columns (schemas.FACTS) for the synthetic knowledge."""

    def __init__(self, rng):
        self.rng, self.parts = rng, []

    def _add(self, subjects, pid, hop, **cols):
        n = len(subjects)
        base = {"subject_qid": list(subjects), "subject_label": [None] * n, "property_id": [pid] * n, "hop": [hop] * n,
                "rank": ["normal"] * n}
        self.parts.append(pl.DataFrame({**base, **cols}, strict=False))

    def item(self, subjects, pid, idx, qids, labels, hop):
        qids, labels = np.array(qids), np.array(labels)
        self._add(subjects, pid, hop, value_type=["item"] * len(subjects), value_qid=qids[idx].tolist(),
                  value_label=labels[idx].tolist())

    def item_share(self, subjects, share, pid, n_values, qids, labels, hop, second=0.0):
        subjects = np.array(subjects)
        chosen = subjects[self.rng.random(len(subjects)) < share]
        self.item(chosen, pid, self.rng.integers(0, n_values, len(chosen)), qids, labels, hop)
        twice = chosen[self.rng.random(len(chosen)) < second]
        self.item(twice, pid, self.rng.integers(0, n_values, len(twice)), qids, labels, hop)

    def time_share(self, subjects, share, pid, lo, hi, precision, hop):
        subjects = np.array(subjects)
        chosen = subjects[self.rng.random(len(subjects)) < share]
        years = self.rng.integers(lo, hi, len(chosen))
        if precision == 9:
            times = [f"+{y:04d}-00-00T00:00:00Z" for y in years]
        else:
            days = self.rng.integers(1, 29, len(chosen))
            months = self.rng.integers(1, 13, len(chosen))
            times = [f"+{y:04d}-{m:02d}-{d:02d}T00:00:00Z" for y, m, d in zip(years, months, days)]
        self._add(chosen, pid, hop, value_type=["time"] * len(chosen), time=times, precision=[precision] * len(chosen))

    def quantity_share(self, subjects, share, pid, lo, hi, unit, unit_label, hop, point_in_time=None):
        subjects = np.array(subjects)
        chosen = subjects[self.rng.random(len(subjects)) < share]
        amounts = np.round(self.rng.uniform(lo, hi, len(chosen)), 1 if hi < 10_000 else 0)
        self._add(chosen, pid, hop, value_type=["quantity"] * len(chosen), amount=amounts.tolist(),
                  unit_qid=[unit] * len(chosen), unit_label=[unit_label] * len(chosen),
                  point_in_time=[point_in_time] * len(chosen))

    def table(self) -> pa.Table:
        from reasonvqa import schemas

        return _with_schema(pl.concat(self.parts, how="diagonal_relaxed").to_arrow(), schemas.FACTS)


def _with_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Add the schema's missing columns as nulls and cast to it."""
    from reasonvqa import schemas

    for f in schema:
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
    return schemas.conform(table, schema)


def _load(folder: Path) -> dict[str, pa.Table]:
    from reasonvqa import schemas

    tables = {name: pq.read_table(folder / f"{name}.parquet") for name in TABLES}
    for name, schema in (("images", schemas.IMAGES), ("objects", schemas.OBJECTS), ("relations", schemas.RELATIONS),
                         ("links", schemas.ENTITY_LINKS)):
        tables[name] = _with_schema(tables[name], schema)
    return tables


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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

    tables = _load(folder)
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
            "peak_rss_mb": round(_peak_rss_mb()), "largest_worker_peak_rss_mb": round(children.ru_maxrss / 1024),
            "rss_after_loading_inputs_mb": loaded_rss and round(loaded_rss),
            "output_sha256": hashlib.sha256("".join(r[3] for r in results).encode()).hexdigest()}


def write_flow_layout(folder: Path, shard_size: int) -> tuple[list, Path]:
    """The synthetic build as the flow's stages leave it: one source stage folder of Parquet shards
    (images, objects, relations) and the linking stage's ``entity_links`` shards, numbered alike."""
    from reasonvqa.stage import part_name, write_parquet
    from reasonvqa.tasks.sources.ingest import SourceShard

    root = folder / f"flow-{shard_size}"
    source_dir, link_dir = root / "source", root / "links"
    n_images = pq.ParquetFile(folder / "images.parquet").metadata.num_rows
    shards = [SourceShard(n, "synthetic", 0, n, source_dir) for n in range(-(-n_images // shard_size))]
    if not (root / "done").exists():
        tables = _load(folder)
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

    from reasonvqa.flows.build_reasonvqa import run_questions
    from reasonvqa.flows.runners import make_task_runner
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
        return run_questions(shards, link_dir, out, folder / "facts.parquet", QuestionConfig(), 0, "synthetic")

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
            "peak_rss_mb": round(_peak_rss_mb()),
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

    tables = _load(folder)
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
            "est_questions": round(made / len(wanted) * images.num_rows), "peak_rss_mb": round(_peak_rss_mb())}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="share of the ReasonVQA-size image count")
    parser.add_argument("--shard-size", type=int, default=5000)
    parser.add_argument("--baseline-images", type=int, default=3000)
    parser.add_argument("--mode", choices=["all", "vectorized", "baseline", "workers", "flow"], default="all",
                        help="workers: the vectorized run with 1 and with --workers processes, alternating, and "
                             "their outputs compared (no baseline)")
    parser.add_argument("--workers", type=int, default=2, help="processes for the parallel vectorized run")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (mode workers), medians reported")
    args = parser.parse_args()
    folder = TMP / f"scale-{args.scale}"
    if args.mode in ("vectorized", "baseline"):
        result = (run_vectorized(folder, args.shard_size, args.workers) if args.mode == "vectorized"
                  else run_baseline(folder, args.baseline_images))
        print(json.dumps(result))
        return
    if args.mode == "workers":
        compare_workers(folder, args)
        return
    if args.mode == "flow":
        make_synthetic(folder, args.scale)
        print(json.dumps(run_flow(folder, args.shard_size)))
        return
    t0 = time.perf_counter()
    make_synthetic(folder, args.scale)
    print(f"synthetic data ready in {time.perf_counter() - t0:.1f} s: {folder}")
    results = {}
    for mode in ("vectorized", "baseline"):
        cmd = [sys.executable, "-m", "benchmarks.bench_question_generation", "--mode", mode, "--scale", str(args.scale),
               "--shard-size", str(args.shard_size), "--baseline-images", str(args.baseline_images)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        print(mode, results[mode])
    vec, base = results["vectorized"], results["baseline"]
    qps = vec["questions"] / vec["total_s"]
    base_qps = base["est_questions"] / base["est_total_s"]
    print(f"vectorized: {vec['questions']:,} questions from {vec['candidates']:,} candidates, {vec['images']:,} images in "
          f"{vec['total_s']} s ({qps:,.0f} questions/s, index {vec['index_s']} s), peak RSS {vec['peak_rss_mb']} MB "
          f"({vec['rss_after_loading_inputs_mb']} MB after loading all input tables)")
    print(f"baseline (scaled from {base['images']} images): {base['est_total_s']} s ({base_qps:,.0f} questions/s), "
          f"peak RSS {base['peak_rss_mb']} MB; speed-up x{base['est_total_s'] / vec['total_s']:.1f}")


def compare_workers(folder: Path, args) -> None:
    """One process vs ``--workers`` processes over the same shards, alternating; outputs must be identical."""
    import os
    import statistics

    make_synthetic(folder, args.scale)
    print(f"load average before: {os.getloadavg()}", flush=True)
    runs: dict[int, list[dict]] = {1: [], args.workers: []}
    for rep in range(args.repeat):
        for workers in ((1, args.workers) if rep % 2 == 0 else (args.workers, 1)):
            cmd = [sys.executable, "-m", "benchmarks.bench_question_generation", "--mode", "vectorized", "--scale",
                   str(args.scale), "--shard-size", str(args.shard_size), "--workers", str(workers)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
            result = json.loads(out.stdout.strip().splitlines()[-1])
            runs[workers].append(result)
            print(f"workers={workers}: {result['questions']:,} questions in {result['total_s']} s "
                  f"({result['questions'] / result['total_s']:,.0f}/s), CPU {result['cpu_s']} s, peak RSS "
                  f"{result['peak_rss_mb']} MB (largest worker {result['largest_worker_peak_rss_mb']} MB)", flush=True)
    digests = {r["output_sha256"] for rs in runs.values() for r in rs}
    if len(digests) != 1:
        raise AssertionError("the parallel run's questions differ from the serial run's")
    print(f"load average after: {os.getloadavg()}")
    for workers, rs in runs.items():
        s = statistics.median(r["total_s"] for r in rs)
        print(f"workers={workers}: median {s:.1f} s, {rs[0]['questions'] / s:,.0f} questions/s")
    print("outputs identical (sha256 of every shard's questions, in shard order)")


if __name__ == "__main__":
    main()
