"""Benchmark: a ReasonVQA-scale rebuild end to end, stage by stage against each stage's floor (issue 34).

    python -m benchmarks.bench_rehearsal --scale 0.01|0.1|1 [--inputs DIR] [--json FILE]
    python -m benchmarks.bench_rehearsal --sample [--repeats 3] [--baseline OTHER_CHECKOUT]
    python -m benchmarks.bench_rehearsal --cooccurrence --scale 0.01|0.1 [--old-images 300] [--old-ref main]

``--scale``: writes (once, reused) the rehearsal's raw inputs at that fraction of ReasonVQA's size
(``reasonvqa/rehearsal_inputs.py``: Visual Genome JSON, GLDv2 CSVs, a Wikidata JSON-lines dump), then
measures with benchmarks/measure.py (fresh interpreter; wall, CPU seconds and the peak RSS of the process
tree from ``wait4``) ``reasonvqa build --config rehearsal.yaml`` (the real Prefect flow, default config,
the embedded Oxigraph mirror built from the dump: a fresh ``XDG_CACHE_HOME``, so the store is built in the
run) and then ``reasonvqa verify`` on the release. Per stage it reads from the build's work folder: the
stage's wall span (from its shards' ``seconds`` and their ``_done`` markers' times; stages overlap), the
summed CPU seconds of its shards' computing threads (``cpu_seconds``), rows in and out, and its Prefect
task count (one task per source unit or shard); the mirror's mapping and load seconds come from the store's
``build_report.json``, the release step is from the last stage's end to the manifest's write.

Floors, each a fresh interpreter measured the same way: reading the raw inputs (orjson for the VG JSON
and the dump's lines, pyarrow for the CSVs), the mirror's Oxigraph bulk load of the mapped N-Triples,
generation from the cached facts (``questions_for_shard`` over the build's shards, one process, no
Prefect), and the release step's floor (``bench_release_floor.run_floor``: read the pool and write pool,
train and test, nothing decided). Prints and writes (``--json``, ``--markdown``) a table: stage, wall,
CPU, rows, tasks, floor, ratio; the whole build's peak memory and the load before and after.

``--cooccurrence`` times only the grounded stage's absence choice (``absence.absent_labels``, default
grounded config, no taxonomy) on the rehearsal's Visual Genome corpus (its (image, label) pairs read from
``objects.json``), in the build's shards of 5,000 images, against ``--old-ref``'s absence.py and
cooccurrence.py (from git, imported as a temporary module) on the first ``--old-images`` images; each side a
fresh interpreter (shards in one process, as a worker takes them: the new code builds its counts in the first);
prints ms per image of each.

``--sample`` times ``reasonvqa build --sample`` (what bench_end_to_end did), alternating with
``--baseline``'s checkout, and prints each side's release content hash.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import measure

ROOT = measure.ROOT
DEFAULT_INPUTS = Path(tempfile.gettempdir()) / "reasonvqa-rehearsal"
STAGE_ORDER = ("sources_vg", "sources_gldv2", "mirror", "grounded", "link", "facts", "questions", "release")


# --- children: the floors --------------------------------------------------------------------------


def floor_read(inputs: Path) -> dict:
    """Parse every raw input with the fastest parser at hand: orjson for the JSON, pyarrow for the CSVs."""
    import orjson
    import pyarrow.csv as pacsv

    rows = {}
    for name in ("image_data", "objects", "attributes", "relationships"):
        document = orjson.loads((inputs / "vg" / f"{name}.json").read_bytes())
        rows[f"vg/{name}"] = len(document)
        del document
    for name in ("train", "train_clean", "train_label_to_category"):
        rows[f"gldv2/{name}"] = pacsv.read_csv(inputs / "gldv2" / f"{name}.csv").num_rows
    entities = 0
    with (inputs / "entities" / "rehearsal.jsonl").open("rb") as handle:
        for line in handle:
            orjson.loads(line)
            entities += 1
    rows["entities"] = entities
    return {"rows": rows}


def floor_mirror_load(ntriples: Path, location: Path) -> dict:
    """Oxigraph's bulk load of the mirror's N-Triples (mapped beforehand, not timed here)."""
    from reasonvqa.knowledge.mirror import oxigraph_binary

    subprocess.run([oxigraph_binary(), "load", "--location", str(location), "--file", str(ntriples)], check=True,
                   capture_output=True)
    return {"triples_bytes": ntriples.stat().st_size}


def prepare_ntriples(entities: Path, out: Path) -> dict:
    """The mirror's mapping to N-Triples, for the load floor (a child of its own, not measured)."""
    from reasonvqa.knowledge.mirror import write_ntriples

    report = write_ntriples(entities, out)
    return {"entities": report["entities"], "truthy_triples": report["truthy_triples"]}


def floor_generation(work: Path) -> dict:
    """Templated questions from the build's cached links and merged facts: the stage's own function over every
    source shard, in this one process, with no Prefect and nothing written."""
    from reasonvqa.shards import SourceShard
    from reasonvqa.tasks.questions.config import QuestionConfig
    from reasonvqa.tasks.questions.shard import questions_for_shard

    manifest = json.loads((work / "shards.json").read_text())
    shards = [SourceShard(m["number"], m["source"], m["unit"], m["shard"], work / m["stage_dir"]) for m in manifest]
    questions = candidates = 0
    for shard in shards:
        result = questions_for_shard(shard, work / "link", work / "facts_merged.parquet", QuestionConfig(), 0, "rehearsal-floor")
        questions += result.counted_out()
        candidates += result.rows_in
    return {"shards": len(shards), "candidates": candidates, "questions": questions}


def floor_release(release: Path, out: Path) -> dict:
    """bench_release_floor's floor on this release's pool: read it, write pool, train and test as they are."""
    import pyarrow.parquet as pq

    from benchmarks.bench_release_floor import run_floor

    n_train = sum(pq.ParquetFile(p).metadata.num_rows for p in sorted((release / "train").glob("*.parquet")))
    n_test = sum(pq.ParquetFile(p).metadata.num_rows for p in sorted((release / "test").glob("*.parquet")))
    return run_floor(release / "pool", out, n_train, n_test)


# --- the work folder's accounting --------------------------------------------------------------------


def grounded_cpu(work: Path, dump: Path | None = None, profile: Path | None = None) -> dict:
    """The grounded stage's own function over each source shard of a kept build's work folder, in this process (no
    Prefect, nothing written): CPU seconds in all and inside ``absent_labels`` (the absence co-occurrence, timed
    apart), ms per image without it. ``dump``: write each shard's questions, regions and rejects there (to compare
    two checkouts' outputs byte for byte); ``profile``: write a cProfile of the run there."""
    import cProfile

    import pyarrow.parquet as pq

    from reasonvqa.shards import SourceShard
    from reasonvqa.stage_contract import ShardContext
    from reasonvqa.tasks.questions import grounded_shard
    from reasonvqa.tasks.questions.grounded_config import GroundedConfig
    from reasonvqa.tasks.questions.grounded_stage import GroundedStage, GroundedStageConfig
    from reasonvqa.tasks.questions.text import english

    manifest = json.loads((work / "shards.json").read_text())
    shards = [SourceShard(m["number"], m["source"], m["unit"], m["shard"], work / m["stage_dir"]) for m in manifest]
    config = GroundedStageConfig(rules=GroundedConfig(), corpus=work / "corpus_labels.parquet",
                                 corpus_relations=work / "corpus_relations.parquet")
    stage = GroundedStage(config)
    absent_labels, absence_cpu = grounded_shard.absent_labels, [0.0]

    def timed_absent_labels(*args, **kwargs):
        start = time.process_time()
        try:
            return absent_labels(*args, **kwargs)
        finally:
            absence_cpu[0] += time.process_time() - start

    grounded_shard.absent_labels = timed_absent_labels  # type: ignore[assignment]
    english()  # inflect's import (typeguard instruments it: seconds) is once per process, not per image
    inputs = [(shard, stage.read(shard)) for shard in shards]
    images = sum(t["images"].num_rows for _, t in inputs)
    profiler = cProfile.Profile() if profile else None
    cpu0 = time.process_time()
    if profiler:
        profiler.enable()
    results = [(shard, stage.process(tables, ShardContext(unit=shard, shard=shard.number)))
               for shard, tables in inputs]
    if profiler:
        profiler.disable()
        profiler.dump_stats(str(profile))
    cpu = time.process_time() - cpu0
    if dump:
        dump.mkdir(parents=True, exist_ok=True)
        for shard, result in results:
            for name, table in result.outputs.items():
                pq.write_table(table, dump / f"{shard.number}-{name}.parquet")
            pq.write_table(result.rejects.table(), dump / f"{shard.number}-rejects.parquet")
            (dump / f"{shard.number}-counts.json").write_text(json.dumps(
                {"rows_in": result.rows_in, "rows_out": result.rows_out, "extra": result.extra}, sort_keys=True))
    with_regions = sum(len(set(r.outputs["regions"]["image_id"].to_pylist())) for _, r in results)
    return {"code": str(Path(grounded_shard.__file__).parent), "images": images, "images_with_regions": with_regions, "questions": sum(r.rows_out for _, r in results),
            "cpu_s": round(cpu, 3), "absence_cpu_s": round(absence_cpu[0], 3),
            "ms_per_image_with_regions_without_absence": round(1000 * (cpu - absence_cpu[0]) / max(with_regions, 1), 3)}


# A child that imports this checkout's ``benchmarks`` by its file path and everything else from its interpreter's
# environment: ``python -m`` would put this checkout first on sys.path, so a baseline checkout's interpreter would
# import this checkout's ``reasonvqa`` (its folder is here) instead of its own editable install's.
_CHILD = ("import importlib.util, sys; "
          "spec = importlib.util.spec_from_file_location('benchmarks', {init!r}, submodule_search_locations=[{folder!r}]); "
          "module = importlib.util.module_from_spec(spec); sys.modules['benchmarks'] = module; "
          "spec.loader.exec_module(module); from benchmarks.bench_rehearsal import main; main()")


def grounded_ab(args: argparse.Namespace) -> dict:
    """``grounded_cpu`` in a fresh interpreter per run, alternating with ``--baseline``'s checkout; medians."""
    folder = Path(__file__).resolve().parent
    code = _CHILD.format(init=str(folder / "__init__.py"), folder=str(folder))
    sides = [measure.side(None, "this checkout")] + ([measure.side(args.baseline, "baseline")] if args.baseline else [])
    load_before = measure.load_average()
    runs = measure.alternate(sides, lambda s: [s.python, "-P", "-c", code, "--child", "--grounded",
                                               str(args.grounded.resolve())], args.repeats)
    per_image = {label: statistics.median(r.result["ms_per_image_with_regions_without_absence"] for r in runs
                                          if r.label == label) for label in dict.fromkeys(r.label for r in runs)}
    result = measure.report("grounded stage function over a build's shards, one process (medians)", runs, load_before,
                            {"ms_per_image_with_regions_without_absence": per_image})
    for run in runs:
        print(f"{run.label}: {run.result}")
    return result


def _stage_shards(folder: Path) -> list[tuple[dict, float]]:
    """(stats, marker mtime) of every shard of a stage folder (a source's units included)."""
    found = []
    stat_dirs = [folder / "_stats"] if (folder / "_stats").is_dir() else sorted(folder.glob("unit-*/_stats"))
    for stats_dir in stat_dirs:
        done = stats_dir.parent / "_done"
        for path in sorted(stats_dir.glob("part-*.json")):
            marker = done / path.stem
            mtime = marker.stat().st_mtime if marker.exists() else path.stat().st_mtime
            found.append((json.loads(path.read_text()), mtime))
    return found


def stage_table(work: Path, started: float, store: Path | None, manifest: Path) -> list[dict]:
    """Per stage: wall span, CPU s, rows, Prefect tasks, from the work folder's stats and markers."""
    rows = []
    for stage in STAGE_ORDER:
        folder = work / stage
        if stage in ("mirror", "release") or not folder.is_dir():
            continue
        shards = _stage_shards(folder)
        if not shards:
            continue
        begin = min(mtime - s.get("seconds", 0.0) for s, mtime in shards)
        end = max(mtime for _, mtime in shards)
        if stage.startswith("sources_"):  # streamed: one task per unit, shards written one after another
            tasks = len({p.parent.parent.name for p in folder.glob("unit-*/_stats/part-*.json")})
        else:
            tasks = len(shards)
        rows.append({"stage": stage, "wall_s": round(end - begin, 2), "cpu_s": round(sum(s.get("cpu_seconds", 0.0) for s, _ in shards), 2),
                     "rows_in": sum(s["rows_in"] for s, _ in shards), "rows_out": sum(s["rows_out"] for s, _ in shards),
                     "tasks": tasks, "start_s": round(begin - started, 2), "end_s": round(end - started, 2)})
    if store is not None and (store / "build_report.json").exists():
        report = json.loads((store / "build_report.json").read_text())
        seconds = report.get("seconds", {})
        end = (store / "snapshot.json").stat().st_mtime
        wall = seconds.get("mapping", 0.0) + seconds.get("load", 0.0)
        rows.append({"stage": "mirror", "wall_s": round(wall, 2), "cpu_s": None, "rows_in": report["entities"],
                     "rows_out": report["truthy_triples"], "tasks": 0, "start_s": round(end - wall - started, 2),
                     "end_s": round(end - started, 2), "mapping_s": seconds.get("mapping"), "load_s": seconds.get("load")})
    last = max((r["end_s"] for r in rows), default=0.0)
    pool_rows = json.loads(manifest.read_text()).get("counts", {}).get("pool")
    end = manifest.stat().st_mtime - started
    rows.append({"stage": "release", "wall_s": round(end - last, 2), "cpu_s": None, "rows_in": pool_rows, "rows_out": None,
                 "tasks": None, "start_s": round(last, 2), "end_s": round(end, 2)})
    order = {name: i for i, name in enumerate(STAGE_ORDER)}
    return sorted(rows, key=lambda r: (r["start_s"], order.get(r["stage"], 99)))


# --- the rehearsal ---------------------------------------------------------------------------------


def _child(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchmarks.bench_rehearsal", *args]


def rehearsal(scale: float, inputs_root: Path, keep: bool) -> dict:
    from reasonvqa.rehearsal_inputs import make_rehearsal_inputs

    gen_start = time.perf_counter()
    inputs = make_rehearsal_inputs(inputs_root / f"scale-{scale:g}", scale)
    generated_s = round(time.perf_counter() - gen_start, 1)
    cli = Path(sys.executable).parent / "reasonvqa"
    load_before = measure.load_average()
    scratch = Path(tempfile.mkdtemp(prefix=f"bench-rehearsal-{scale:g}-"))
    try:
        out, cache = scratch / "out", scratch / "cache"
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}  # the mirror store is built in this run
        started = time.time()
        build = measure.run_once([str(cli), "build", "--config", str(inputs.config), "--out", str(out)], env=env,
                                 label="build")
        manifest = next(out.glob("*/*/manifest.json"))
        release = manifest.parent
        verify = measure.run_once([str(cli), "verify", str(release)], label="verify")
        work = next(p.parent for p in (out / ".work").glob("*/run_report.json"))
        store = next((p.parent for p in cache.glob("reasonvqa/mirror-stores/*/build_report.json")), None)
        stages = stage_table(work, started, store, manifest)
        floors = {
            "read": measure.run_once(_child("--floor", "read", "--inputs", str(inputs.folder)), label="read floor"),
        }
        ntriples = scratch / "entities.nt"
        subprocess.run(_child("--floor", "prepare-ntriples", "--inputs", str(inputs.folder), "--out", str(ntriples)),
                       check=True, cwd=ROOT, capture_output=True)
        floors["mirror"] = measure.run_once(_child("--floor", "mirror", "--inputs", str(ntriples),
                                                   "--out", str(scratch / "floor-store")), label="mirror floor")
        floors["questions"] = measure.run_once(_child("--floor", "generation", "--work", str(work)), label="generation floor")
        floors["release"] = measure.run_once(_child("--floor", "release", "--inputs", str(release),
                                                    "--out", str(scratch / "floor-release")), label="release floor")
        load_after = measure.load_average()
        manifest_data = json.loads(manifest.read_text())
        result = {
            "scale": scale, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "load_before": load_before, "load_after": load_after, "inputs": inputs.counts.__dict__,
            "inputs_generated_s": generated_s,
            "build": {"wall_s": build.wall_s, "cpu_s": build.cpu_s, "peak_mb": build.peak_mb},
            "verify": {"wall_s": verify.wall_s, "cpu_s": verify.cpu_s, "peak_mb": verify.peak_mb},
            "release": str(release.relative_to(out)), "counts": manifest_data.get("counts"),
            "stages": stages,
            "floors": {k: {"wall_s": r.wall_s, "cpu_s": r.cpu_s, "peak_mb": r.peak_mb, **r.result} for k, r in floors.items()},
            "run_report": json.loads((work / "run_report.json").read_text()),
        }
        if keep:
            result["kept"] = str(scratch)
        return result
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


FLOOR_OF = {"sources_vg": "read", "sources_gldv2": "read", "mirror": "mirror", "questions": "questions", "release": "release"}


def markdown(result: dict) -> str:
    """The table: stage, wall, CPU, rows, tasks, floor, ratio (the floor's wall against the stage's)."""
    floors = result["floors"]
    lines = [f"scale {result['scale']:g}, {result['date']}, load {result['load_before'][0]:.2f} -> {result['load_after'][0]:.2f}",
             "", "| stage | wall s | CPU s | peak MB | rows in | rows out | tasks | floor | floor wall s | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]

    def cell(value, fmt="{:,}"):
        return "" if value is None else fmt.format(value)

    for row in result["stages"]:
        floor_name = FLOOR_OF.get(row["stage"])
        floor = floors.get(floor_name) if floor_name else None
        ratio = f"{row['wall_s'] / floor['wall_s']:.2f}x" if floor and floor["wall_s"] and floor_name != "read" else ""
        lines.append(f"| {row['stage']} | {row['wall_s']:.1f} | {cell(row['cpu_s'], '{:.1f}')} |  | {cell(row['rows_in'])} | "
                     f"{cell(row['rows_out'])} | {cell(row['tasks'])} | {floor_name or ''} | "
                     f"{cell(floor['wall_s'] if floor else None, '{:.1f}')} | {ratio} |")
    sources = sum(r["wall_s"] for r in result["stages"] if r["stage"].startswith("sources_"))
    read = floors["read"]["wall_s"]
    lines.append(f"| sources (both) | {sources:.1f} |  |  |  |  |  | read | {read:.1f} | {sources / read:.2f}x |")
    build, floor_sum = result["build"], sum(f["wall_s"] for f in floors.values())
    lines.append(f"| **build** | {build['wall_s']:.1f} | {build['cpu_s']:.1f} | {build['peak_mb']:,.0f} |  |  |  | sum of floors | "
                 f"{floor_sum:.1f} | {build['wall_s'] / floor_sum:.2f}x |")
    verify = result["verify"]
    lines.append(f"| verify | {verify['wall_s']:.1f} | {verify['cpu_s']:.1f} | {verify['peak_mb']:,.0f} |  |  |  |  |  |  |")
    lines += ["", "| floor | wall s | CPU s | peak MB |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {f['wall_s']:.1f} | {f['cpu_s']:.1f} | {f['peak_mb']:,.0f} |" for name, f in floors.items()]
    return "\n".join(lines)


# --- the absence choice alone (co-occurrence) -----------------------------------------------------------


def vg_corpus(inputs: Path):
    """(image_id, label) of the rehearsal's Visual Genome objects, as regions.image_labels writes them."""
    import orjson
    import pyarrow as pa

    pairs = sorted({(f"vg:{image['image_id']}", name.strip().lower())
                    for image in orjson.loads((inputs / "vg" / "objects.json").read_bytes())
                    for obj in image["objects"] for name in obj["names"] if name.strip()})
    return pa.table({"image_id": [i for i, _ in pairs], "label": [label for _, label in pairs]})


def _old_absence(ref: str):
    """``ref``'s absence module, its co-occurrence import pointed at ``ref``'s cooccurrence.py."""
    import importlib.util

    folder = Path(tempfile.mkdtemp(prefix="bench-cooc-old-"))
    for name in ("absence", "cooccurrence"):
        text = subprocess.run(["git", "show", f"{ref}:tasks/questions/{name}.py"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        (folder / f"old_{name}.py").write_text(text.replace("reasonvqa.tasks.questions.cooccurrence", "old_cooccurrence"))
    sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("old_absence", folder / "old_absence.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["old_absence"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def cooccurrence_child(inputs: Path, side: str, images: int, ref: str) -> dict:
    """One side's ``absent_labels`` over the corpus's images (``images`` of them, 0: all) in shards of 5,000."""
    from reasonvqa.tasks.questions import absence
    from reasonvqa.tasks.questions.grounded_config import GroundedConfig

    module = _old_absence(ref) if side == "old" else absence
    corpus, config = vg_corpus(inputs), GroundedConfig()
    ids = sorted(set(corpus["image_id"].to_pylist()))[: images or None]
    claims, shards = {}, []
    for at in range(0, len(ids), 5_000):  # one process: from the second shard on, the new code reuses its counts
        start = time.perf_counter()
        claims.update(module.absent_labels(corpus, ids[at:at + 5_000], config.hallucination_candidates_per_image, {},
                                           config.absence_probability, config.absence_min_label_images))
        shards.append(round(time.perf_counter() - start, 3))
    seconds = sum(shards)
    bases = [c.basis or "none" for found in claims.values() for c in found]
    return {"side": side, "images": len(ids), "corpus_images": len(corpus["image_id"].unique()), "pairs": corpus.num_rows,
            "seconds": round(seconds, 3), "shard_seconds": shards, "ms_per_image": round(1000 * seconds / len(ids), 3),
            "claims": {basis: bases.count(basis) for basis in sorted(set(bases))},
            "images_with_cooccurrence": sum(any(c.basis == "cooccurrence" for c in found) for found in claims.values()),
            "peak_mb": round(measure.own_peak_mb(), 1)}


def cooccurrence(scale: float, inputs_root: Path, old_images: int, ref: str) -> dict:
    from reasonvqa.rehearsal_inputs import make_rehearsal_inputs

    inputs = make_rehearsal_inputs(inputs_root / f"scale-{scale:g}", scale)
    load_before = measure.load_average()
    sides = {side: measure.run_once(_child("--cooccurrence-child", side, "--inputs", str(inputs.folder), "--old-images",
                                           str(old_images if side == "old" else 0), "--old-ref", ref), label=side)
             for side in ("new", "old")}
    result = {"scale": scale, "load_before": load_before, "load_after": measure.load_average(),
              **{side: {"wall_s": r.wall_s, "peak_mb": r.peak_mb, **r.result} for side, r in sides.items()}}
    for side in sides:
        print(f"scale {scale:g} {side}: {result[side]['ms_per_image']} ms/image over {result[side]['images']} images "
              f"(corpus {result[side]['corpus_images']} images), claims {result[side]['claims']}")
    return result


# --- the sample build (was bench_end_to_end) ------------------------------------------------------------


def sample(args: argparse.Namespace) -> dict:
    """``reasonvqa build --sample`` timed as a user runs it, alternating with ``--baseline``'s checkout."""
    sides = [measure.side(None, "this checkout")] + ([measure.side(args.baseline, "baseline")] if args.baseline else [])
    load_before = measure.load_average()
    runs, hashes = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-end-to-end-") as scratch:
        for repeat in range(args.repeats):
            for side in sides if repeat % 2 == 0 else sides[::-1]:
                out = Path(scratch) / f"{side.label.replace(' ', '-')}-{repeat}"
                cli = Path(side.python).parent / "reasonvqa"  # the console script beside that interpreter
                runs.append(measure.run_once([str(cli), "build", "--sample", "--out", str(out)], cwd=side.cwd, label=side.label))
                manifest = next(out.glob("*/*/manifest.json"))
                hashes.setdefault(side.label, set()).add(json.loads(manifest.read_text())["content_hash"])
                shutil.rmtree(out, ignore_errors=True)
    extra = {"content_hash": {label: sorted(h) for label, h in hashes.items()}}
    result = measure.report("reasonvqa build --sample (fresh interpreter each)", runs, load_before, extra)
    for label, h in extra["content_hash"].items():
        print(f"{label}: release content {', '.join(h)}")
    return result


def main() -> None:
    parser = measure.parser(__doc__)
    parser.add_argument("--scale", type=float, help="fraction of ReasonVQA's size (0.01, 0.1, 1)")
    parser.add_argument("--sample", action="store_true", help="time `reasonvqa build --sample` instead")
    parser.add_argument("--inputs", type=Path, default=DEFAULT_INPUTS, help="where the generated inputs are kept")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--keep", action="store_true", help="keep the build's output folder")
    parser.add_argument("--grounded", type=Path, metavar="WORK",
                        help="time the grounded stage's function over a kept build's work folder (A/B with --baseline)")
    parser.add_argument("--dump", type=Path, help="with --grounded: write its outputs there")
    parser.add_argument("--profile", type=Path, help="with --grounded: write a cProfile there")
    parser.add_argument("--cooccurrence", action="store_true", help="time absence.absent_labels alone, new and old")
    parser.add_argument("--old-images", type=int, default=300, help="images the old absence code is timed on")
    parser.add_argument("--old-ref", default="main", help="the git ref of the old absence code")
    parser.add_argument("--cooccurrence-child", choices=("new", "old"), help=argparse.SUPPRESS)
    parser.add_argument("--floor", choices=("read", "prepare-ntriples", "mirror", "generation", "release"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor:
        floors = {"read": lambda: floor_read(args.inputs), "prepare-ntriples": lambda: prepare_ntriples(args.inputs, args.out),
                  "mirror": lambda: floor_mirror_load(args.inputs, args.out), "generation": lambda: floor_generation(args.work),
                  "release": lambda: floor_release(args.inputs, args.out)}
        measure.child_result(floors[args.floor]())
        return
    if args.grounded and args.child:
        measure.child_result(grounded_cpu(args.grounded, args.dump, args.profile))
        return
    if args.cooccurrence_child:
        measure.child_result(cooccurrence_child(args.inputs, args.cooccurrence_child, args.old_images, args.old_ref))
        return
    if args.grounded:
        result = grounded_ab(args)
    elif args.cooccurrence and args.scale:
        result = cooccurrence(args.scale, args.inputs, args.old_images, args.old_ref)
    elif args.sample:
        result = sample(args)
    elif args.scale:
        result = rehearsal(args.scale, args.inputs, args.keep)
        table = markdown(result)
        print(table)
        if args.markdown:
            args.markdown.write_text(table + "\n")
    else:
        parser.error("give --scale or --sample")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
