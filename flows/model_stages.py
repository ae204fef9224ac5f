"""Prefect tasks for model stages: one task per shard, paths in, stats out.

Each task asks its worker process for the stage's one set-up instance
(``reasonvqa.model_stage.instance``), so weights load once per worker process whatever the
runner: threads of the ``ThreadPoolTaskRunner`` share one instance, each Dask worker process
sets up its own.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel

from reasonvqa.model_stage import ModelStage, done_shard_stats, instance, run_model_shard, teardown_stage


def read_shard_inputs(paths: dict[str, Path | None], declared: dict[str, pa.Schema]) -> dict[str, pa.Table]:
    """Read one shard's input tables; ``None`` (the shard has no such table) gives an empty one.

    A ``None`` table must be declared in the stage's ``inputs`` (its schema makes the empty
    table); a path that does not exist is an error, not an empty table.
    """
    tables = {}
    for name, path in paths.items():
        if path is None:
            if name not in declared:
                raise ValueError(f"input table {name!r} has no file and no declared schema to make it empty")
            tables[name] = declared[name].empty_table()
        elif not Path(path).is_file():
            raise FileNotFoundError(f"input table {name!r} not found: {path}")
        else:
            tables[name] = pq.read_table(path)
    return tables


@task(name="model-shard", cache_policy=NO_CACHE)
def model_shard(stage: type[ModelStage], config: BaseModel | None, device: str | None, stage_dir: Path,
                shard: int, inputs: dict[str, Path | None]) -> dict:
    """Run one shard of a model stage on this worker's set-up instance; return its stats.

    A finished shard returns its stats without setting the stage up.
    """
    done = done_shard_stats(stage_dir, shard)
    if done is not None:
        return done
    worker_stage = instance(stage, config, device)
    return run_model_shard(stage_dir, shard, worker_stage, lambda: read_shard_inputs(inputs, worker_stage.inputs))


def run_model_stage(stage: type[ModelStage], config: BaseModel | None, stage_dir: Path,
                    shard_inputs: dict[int, dict[str, Path | None]], device: str | None = None) -> list[dict]:
    """Submit one ``model-shard`` task per shard id, wait for all; return their stats in shard order.

    Call inside a flow. ``shard_inputs`` maps each shard id to its input table paths. When the
    shards are done the instance held by this process (the thread runner's) is torn down, so
    the next stage has the device to itself; Dask workers keep theirs until they exit.
    """
    shards = sorted(shard_inputs)
    futures = [
        model_shard.with_options(task_run_name=f"{stage.name}-{shard:05d}").submit(
            stage, config, device, Path(stage_dir), shard, shard_inputs[shard])
        for shard in shards
    ]
    try:
        return [future.result() for future in futures]
    finally:
        teardown_stage(stage)
