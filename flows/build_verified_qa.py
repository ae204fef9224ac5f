"""The `build-verified-qa` flow: scene graphs -> LLM QA pairs + programs -> sandbox -> filters.

Scene graphs come from Visual Genome (objects, attributes, relationships, through the VG
reader) or from a JSON Lines file of caption tuple graphs, one image a line::

    {"image_id": "docci:test_00001", "caption": "...", "scene_graph": {entity: {"attributes": [...], "relations_to": {...}}}}

One Prefect task per shard of images (``verified-qa-shard-NNNNN``, through the stage runner,
flows/stage_runner.py, one shard at a time: its LLM calls are the load), the stage torn down after
the last; each shard's LLM calls are cached (``CallCache``), so a killed run repeats no finished call
and a rerun of a finished build makes none. Outputs under
OUT: ``questions.parquet`` (the release QUESTIONS schema, ``kind = "verified"``),
``rejects.parquet`` and ``stats.json`` (per-reason counts and PROVE's breakdown).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pyarrow as pa
from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from reasonvqa import schemas
from reasonvqa.flows.stage_runner import run_stage
from reasonvqa.stage import Rejects, StageResult, read_table, run_stream, shard_paths, stage_stats, summarize, write_json, write_parquet
from reasonvqa.storage import local_work_folder
from reasonvqa.tasks.release.paths import default_work_folder
from reasonvqa.tasks.verify.verified import GRAPHS, VerifiedQAConfig, VerifiedQAStage, proves_breakdown
from reasonvqa.templates.prompt_loader import prompt_versions
from reasonvqa.tasks.verify.scene_graph import SceneGraph, SceneGraphError, from_tables


class GraphSource(BaseModel):
    """Where the scene graphs come from."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["vg", "tuples"]
    path: Path
    max_images: int | None = Field(default=None, ge=1)


class VerifiedBuildConfig(BaseModel):
    """Configuration of build-verified-qa (YAML with these keys)."""

    model_config = ConfigDict(extra="forbid")

    graphs: GraphSource
    verified: VerifiedQAConfig = Field(default_factory=VerifiedQAConfig)
    shard_size: int = Field(default=100, ge=1, description="Images per shard (one Prefect task each).")


def tuple_graph_shards(path: Path, shard_size: int, max_images: int | None) -> list[StageResult]:
    """Read a caption tuple JSONL file into GRAPHS shards; bad lines are rejects naming file and line."""
    results: list[StageResult] = []
    rows: list[dict] = []
    rejects = Rejects("graphs", 0)
    rows_in = 0

    def flush() -> None:
        nonlocal rows, rejects, rows_in
        results.append(StageResult({"graphs": schemas.from_rows(rows, GRAPHS)}, rejects, rows_in))
        rows, rejects, rows_in = [], Rejects("graphs", len(results)), 0

    seen: set[str] = set()
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            if max_images is not None and len(seen) >= max_images:
                break
            rows_in += 1
            where = f"{Path(path).name}:{number}"
            try:
                record = json.loads(line)
                image_id = str(record["image_id"])
                graph = SceneGraph(str(record.get("caption") or ""), record["scene_graph"])
            except (ValueError, KeyError, TypeError, SceneGraphError) as exc:
                rejects.add("bad_graph", where, f"{type(exc).__name__}: {exc}: {line[:500]}")
                continue
            if image_id in seen:
                rejects.add("duplicate_image", where, image_id)
                continue
            seen.add(image_id)
            rows.append({"image_id": image_id, "image_source": image_id.split(":", 1)[0] if ":" in image_id else "tuples",
                         "graph": graph.dumps()})
            if len(rows) >= shard_size:
                flush()
    if rows or len(rejects) or not results:
        flush()
    return results


def vg_graph_shards(path: Path, work: Path, shard_size: int, max_images: int | None) -> list[StageResult]:
    """Read Visual Genome through the VG reader and build one graph per image."""
    from reasonvqa.tasks.sources.vg import ingest_vg

    stage = work / "vg"
    ingest_vg(Path(path), stage, max_images=max_images)
    graphs = from_tables(read_table(stage, "objects", schemas.OBJECTS), read_table(stage, "attributes", schemas.ATTRIBUTES),
                         read_table(stage, "relations", schemas.RELATIONS))
    items = sorted(graphs.items())
    results: list[StageResult] = []
    for start in range(0, max(len(items), 1), shard_size):
        chunk = items[start:start + shard_size]
        rows = [{"image_id": k, "image_source": "vg", "graph": g.dumps()} for k, g in chunk]
        results.append(StageResult({"graphs": schemas.from_rows(rows, GRAPHS)}, Rejects("graphs", len(results)), len(rows)))
    return results


@flow(name="build-verified-qa", log_prints=True)
def build_verified_qa(config: VerifiedBuildConfig, out: str, work: str | None = None) -> str:
    """Build verified free-form questions into OUT; return OUT."""
    out_dir = Path(out)
    work_dir = local_work_folder(work) if work else default_work_folder(out_dir, out_dir / ".work")  # a URL is refused
    graphs_dir = work_dir / "graphs"
    source = config.graphs
    if source.kind == "vg":
        shards = vg_graph_shards(source.path, work_dir, config.shard_size, source.max_images)
    else:
        shards = tuple_graph_shards(source.path, config.shard_size, source.max_images)
    run_stream(graphs_dir, shards)
    stage_dir = work_dir / "verified_qa"
    units = [{"graphs": path} for path in shard_paths(graphs_dir, "graphs")]
    run_stage(VerifiedQAStage, config.verified, stage_dir, units, in_flight=1)

    questions = read_table(stage_dir, "questions", schemas.QUESTIONS)
    questions = questions.sort_by("question_id")
    rejects = pa.concat_tables([read_table(graphs_dir, "_rejects", schemas.REJECTS),
                                read_table(stage_dir, "_rejects", schemas.REJECTS)])
    write_parquet(questions, out_dir / "questions.parquet")
    write_parquet(rejects.sort_by([("stage", "ascending"), ("shard", "ascending"), ("source", "ascending"),
                                   ("reason", "ascending")]), out_dir / "rejects.parquet")
    write_json(run_report(graphs_dir, stage_dir, config), out_dir / "stats.json")
    return str(out_dir)


def run_report(graphs_dir: Path, stage_dir: Path, config: VerifiedBuildConfig) -> dict:
    """Per-stage totals, PROVE's breakdown, prompt versions and the sandbox's layers."""
    shard_stats = stage_stats(stage_dir)
    totals = summarize(shard_stats)
    return {
        "graphs": summarize(stage_stats(graphs_dir)),
        "verified_qa": totals,
        "prove_breakdown": proves_breakdown(totals["rows_in"], totals["rejected"]),
        "prompt_versions": prompt_versions(),
        "generator_model": config.verified.llm.model,
        "sandbox": shard_stats[0].get("sandbox") if shard_stats else None,
        "llm_calls_made": sum(s.get("calls_made", 0) for s in shard_stats),
        "llm_calls_cached": sum(s.get("calls_cached", 0) for s in shard_stats),
    }
