"""The stage contract: what every stage of a build declares, and how one shard of it runs.

A stage is a class in its stage package (``tasks/<area>/``, ``knowledge/``)::

    class CountTags(Stage):
        name = "count_tags"                            # its folder under the work folder, its task names
        inputs = {"images": schemas.IMAGES}           # tables it reads (a shard lacking one gets it empty)
        outputs = {"tag_counts": TAG_COUNTS}          # tables it writes (default: schemas.TABLES)
        resources = Resources(device="cuda", memory_mb=8000)   # only model stages: None = a function stage
        batch_size = 8                                # default; the config's batch_size wins

        def setup(self) -> None:          # once per worker process: load weights on self.device
            self.model = load(self.config.weights, device=self.device)

        def teardown(self) -> None:       # when the stage ends (the runner), or at process exit
            del self.model

        def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
            ...                           # model calls through ctx.cache.call(namespace, inputs, compute)

``config`` is the stage's pydantic config (everything that decides its answers); one shard is
described by a *unit*: by default ``{table: path | None | pa.Table}``, read by ``Stage.read``
(a stage whose unit is something else, e.g. a ``SourceShard``, overrides ``read``). A
*streaming* stage (``streams = True``: the sources) yields several shards per unit from
``stream(unit, ctx)`` into ``folder(stage_dir, number)``. A stage whose shards are CPU-bound Python
sets ``cpu_bound = True``: the local runner then computes its shards in worker processes.

``instance(StageClass, config)`` returns the worker process's one set-up instance for that
class, config and device: threads of a thread-pool runner share it, each Dask worker process
sets up its own once. The runner (``flows/stage_runner.py``) tears it down when the stage ends
(``teardown_stage``); instances left are torn down at process exit (``atexit``; for
multiprocessing pool workers, which skip ``atexit``, a multiprocessing finalizer).

A model stage's device is settled before ``setup`` loads anything: a stage that needs CUDA on a
machine without it raises ``DeviceUnavailable`` unless its config sets ``allow_cpu_fallback``.

``run_unit`` runs one unit under the shard writers of ``reasonvqa.stage`` (markers, resume,
accounting), a model stage with a per-shard ``CallCache`` (a rerun of a killed shard repeats no
finished call), and checks every output table against its declared schema, nested types included.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import logging
import multiprocessing.util
import os
import sys
import threading
from abc import ABC
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from reasonvqa import schemas, workstore
from reasonvqa.call_cache import CallCache, canonical_key
from reasonvqa.stage import (
    StageResult, clear_shard_scratch, is_done, part_name, read_stats, run_shard, stage_stats, write_unit,
)
from reasonvqa.table_check import SchemaMismatch, check_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resources:
    """What one worker of a stage needs: the device kind and an estimate of its memory."""

    device: Literal["cpu", "cuda"] = "cpu"
    memory_mb: int = 512


class ModelStageConfig(BaseModel):
    """Settings every model stage's config has (stage configs subclass this)."""

    model_config = ConfigDict(extra="forbid")

    device: str | None = Field(None, pattern=r"^(cpu|cuda(:\d+)?)$", description="overrides the stage's declared device")
    allow_cpu_fallback: bool = Field(False, description="run on cpu (with a warning) when CUDA is not available")
    batch_size: int | None = Field(None, ge=1, description="overrides the stage's default batch size")


class DeviceUnavailable(RuntimeError):
    """A stage asked for a device or memory this machine does not have."""


def cuda_device_count() -> int:
    """CUDA devices torch can use here (0 when torch is not installed)."""
    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def memory_limit_mb(device: str) -> int:
    """Total memory of ``device``: the GPU's, or the host's (capped by a Dask worker's limit)."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory // 2**20
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    if "distributed" in sys.modules:  # inside a Dask worker, its memory limit applies
        from distributed import get_worker

        try:
            limit = get_worker().memory_manager.memory_limit
        except ValueError:  # not in a worker
            limit = None
        if limit:
            total = min(total, int(limit) // 2**20)
    return total


def resolve_device(stage: str, requested: str, memory_mb: int, allow_cpu_fallback: bool = False) -> str:
    """The device ``stage`` runs on, or ``DeviceUnavailable`` with a one-line reason."""
    device = requested
    if requested.startswith("cuda"):
        index = int(requested.partition(":")[2] or 0)
        count = cuda_device_count()
        if index >= count:
            found = "no CUDA device" if count == 0 else f"{count} CUDA device(s)"
            if not allow_cpu_fallback:
                raise DeviceUnavailable(f"stage {stage!r} needs {requested} but this machine has {found}; "
                                        "set device: cpu or allow_cpu_fallback: true in its config")
            log.warning("stage %r needs %s but this machine has %s: running on cpu", stage, requested, found)
            device = "cpu"
    available = memory_limit_mb(device)
    if memory_mb > available:
        raise DeviceUnavailable(f"stage {stage!r} declares {memory_mb} MB but {device} has {available} MB")
    return device


@dataclass
class ShardContext:
    """What a stage gets besides its inputs: the shard (or unit) number, the model stage's call
    cache (None for a function stage), the unit as given and the stage's folder."""

    shard: int
    cache: CallCache | None = None
    unit: Any = None
    stage_dir: Path | None = None


class Stage(ABC):
    """One stage of a build. See the module docstring."""

    name: ClassVar[str]
    inputs: ClassVar[dict[str, pa.Schema]] = {}
    outputs: ClassVar[dict[str, pa.Schema]] = {}
    resources: ClassVar[Resources | None] = None  # declared: a model stage (device, memory, call cache)
    streams: ClassVar[bool] = False  # several shards per unit, from ``stream``
    # its shards are CPU-bound Python: on the local thread runner, computed in worker processes (one GIL each)
    cpu_bound: ClassVar[bool] = False
    config_model: ClassVar[type[BaseModel] | None] = None  # validates a build config's ``stages`` entry
    batch_size: int = 1

    def __init__(self, config: BaseModel | None = None, device: str | None = None) -> None:
        """Settle device and batch size (``DeviceUnavailable`` before anything is loaded)."""
        self.config = config
        self.device: str | None = None
        if self.resources is not None:
            requested = device or getattr(config, "device", None) or self.resources.device
            self.device = resolve_device(self.name, requested, self.resources.memory_mb,
                                         bool(getattr(config, "allow_cpu_fallback", False)))
        self.batch_size = getattr(config, "batch_size", None) or type(self).batch_size

    def setup(self) -> None:  # noqa: B027 (optional hook: function stages have nothing to load)
        """Load weights or open clients (once per worker process). Default: nothing."""

    def teardown(self) -> None:  # noqa: B027 (optional hook, as setup)
        """Release what ``setup`` took. Default: nothing."""

    def read(self, unit: Any) -> dict[str, pa.Table]:
        """One shard's input tables from its unit (default: ``{table: path | None | pa.Table}``)."""
        return read_shard_inputs(unit, self.inputs)

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        """Compute one shard's result from its input tables."""
        raise NotImplementedError(f"stage {self.name!r} implements neither process nor stream")

    def stream(self, unit: Any, ctx: ShardContext) -> Iterator[StageResult]:
        """A streaming stage's shards of one unit, in order (``RereadUnit``: discard them, read again)."""
        raise NotImplementedError(f"stage {self.name!r} does not stream")

    @classmethod
    def folder(cls, stage_dir: Path, number: int) -> Path:
        """The stage folder unit ``number`` writes into: ``stage_dir`` (a streaming stage: one per unit)."""
        if cls.streams:
            return Path(stage_dir) / f"unit-{number:05d}"
        return Path(stage_dir)

    def output_schema(self, table: str) -> pa.Schema:
        """The declared schema of one output table (``outputs``, else ``schemas.TABLES``)."""
        schema = self.outputs[table] if table in self.outputs else schemas.TABLES.get(table)
        if schema is None:
            raise SchemaMismatch(f"stage {self.name!r}: output table {table!r} is declared neither in "
                                 f"{type(self).__name__}.outputs nor in reasonvqa.schemas.TABLES")
        return schema

    def fingerprint(self) -> str:
        """Identity of what answers calls: class, config and device (a call cache keeps to one)."""
        config = self.config.model_dump_json() if self.config is not None else ""
        cls = type(self)
        return canonical_key("stage", [f"{cls.__module__}.{cls.__qualname__}", self.name, config, self.device or ""])


class StageEntry(BaseModel):
    """An extra stage of a build (the build config's ``stages``): the stage class by import path and its
    config, validated by the class's ``config_model``. The build runs it over every source shard, after
    the sources (and proposals), into ``<work>/<name>/``."""

    model_config = ConfigDict(extra="forbid")

    stage: str = Field(pattern=r"^[\w.]+:\w+$", description="import path of a Stage subclass, package.module:Class")
    config: dict[str, Any] = Field(default_factory=dict, description="its config (the class's config_model)")

    def load(self) -> tuple[type[Stage], BaseModel | None]:
        """The stage class and its validated config (ValueError naming the entry when it is neither)."""
        module, _, name = self.stage.partition(":")
        found = getattr(importlib.import_module(module), name, None)
        if not (isinstance(found, type) and issubclass(found, Stage)):
            raise ValueError(f"stages entry {self.stage!r} does not name a reasonvqa.stage_contract.Stage subclass")
        if found.config_model is None:
            if self.config:
                raise ValueError(f"stage {self.stage!r} takes no config (it has no config_model)")
            return found, None
        return found, found.config_model.model_validate(self.config)


def read_shard_inputs(unit: dict[str, Any], declared: dict[str, pa.Schema]) -> dict[str, pa.Table]:
    """Read one shard's input tables; ``None`` (the shard has no such table) gives an empty one.

    A ``None`` table must be declared in the stage's ``inputs`` (its schema makes the empty
    table); a path that does not exist is an error, not an empty table; a table is taken as is.
    """
    tables = {}
    for name, value in unit.items():
        if value is None:
            if name not in declared:
                raise ValueError(f"input table {name!r} has no file and no declared schema to make it empty")
            tables[name] = declared[name].empty_table()
        elif isinstance(value, pa.Table):
            tables[name] = value
        elif not Path(value).is_file():
            raise FileNotFoundError(f"input table {name!r} not found: {value}")
        else:
            tables[name] = pq.read_table(value)
    return tables


_InstanceKey = tuple[type, str, "str | None"]
_INSTANCES: dict[_InstanceKey, Stage] = {}
_SETUP_LOCKS: dict[_InstanceKey, threading.Lock] = {}
_INSTANCES_LOCK = threading.Lock()


def instance(stage: type[Stage], config: BaseModel | None = None, device: str | None = None) -> Stage:
    """The worker process's one set-up instance of ``stage`` for this config and device.

    Threads asking at once wait for one ``setup``; a failed setup is not kept (the next call retries).
    """
    key = (stage, config.model_dump_json() if config is not None else "", device)
    with _INSTANCES_LOCK:
        setup_lock = _SETUP_LOCKS.setdefault(key, threading.Lock())
    with setup_lock:  # one lock per key: a slow setup does not hold up other stages
        found = _INSTANCES.get(key)
        if found is None:
            found = stage(config, device)
            found.setup()
            with _INSTANCES_LOCK:
                _INSTANCES[key] = found
        return found


def _teardown(keys: list[_InstanceKey]) -> None:
    for key in keys:
        with _INSTANCES_LOCK:
            stage = _INSTANCES.pop(key, None)
        if stage is None:
            continue
        try:
            stage.teardown()
        except Exception:  # one failing teardown must not keep the others' resources
            log.exception("teardown of stage %r failed", stage.name)


def teardown_stage(stage: type[Stage]) -> None:
    """Tear down this process's instances of ``stage`` (e.g. to free a GPU before the next stage)."""
    with _INSTANCES_LOCK:
        keys = [k for k in _INSTANCES if k[0] is stage]
    _teardown(keys)


def teardown_all() -> None:
    """Tear down every set-up instance of this process (also run when the process exits)."""
    with _INSTANCES_LOCK:
        keys = list(_INSTANCES)
    _teardown(keys)


def _forget_instances_in_child() -> None:
    # a forked child must not use or tear down its parent's models (CUDA contexts do not survive a fork)
    _INSTANCES.clear()
    _SETUP_LOCKS.clear()


atexit.register(teardown_all)
# multiprocessing pool workers leave through os._exit, which skips atexit but runs
# multiprocessing's finalizers (Dask worker processes run atexit).
multiprocessing.util.Finalize(None, teardown_all, exitpriority=10)
os.register_at_fork(after_in_child=_forget_instances_in_child)


def call_cache_path(stage_dir: Path, shard: int) -> Path:
    """Where one shard keeps its finished calls until the shard is done (for a work folder URL, in this
    process's scratch, which outlives the build's mirror: a rerun in the same process reuses the calls)."""
    return workstore.scratch(Path(stage_dir)) / "_calls" / f"{part_name(shard)}.jsonl"


def run_unit(stage: type[Stage], config: BaseModel | None, device: str | None, stage_dir: Path, number: int,
             unit: Any) -> dict | list[dict]:
    """Run unit ``number`` of ``stage`` unless done (no set-up then): the shard's stats (a streaming
    stage: its shards' stats), on this process's set-up instance (``instance``)."""
    done = finished_unit(stage, stage_dir, number)
    if done is not None:
        return done
    folder = stage.folder(Path(stage_dir), number)
    if stage.streams:
        worker = instance(stage, config, device)
        return write_unit(folder, unit, lambda u: worker.stream(u, ShardContext(number, None, u, Path(stage_dir))))
    return run_stage_shard(folder, number, instance(stage, config, device), unit)


def finished_unit(stage: type[Stage], stage_dir: Path, number: int) -> dict | list[dict] | None:
    """The stats ``run_unit`` returns for unit ``number`` when it is done (its marker), else None."""
    folder = stage.folder(Path(stage_dir), number)
    if stage.streams:
        return stage_stats(folder) if workstore.exists(folder / "_done" / "ALL") else None
    return done_shard_stats(folder, number)


def done_shard_stats(stage_dir: Path, shard: int) -> dict | None:
    """The stats of a finished shard, or None when it is not done (no need to set a stage up)."""
    stage_dir = Path(stage_dir)
    if not is_done(stage_dir, shard):
        return None
    clear_shard_scratch(call_cache_path(stage_dir, shard))  # left behind when a run died between marker and cleanup
    return read_stats(stage_dir, shard)


def run_stage_shard(stage_dir: Path, shard: int, stage: Stage, unit: Any) -> dict:
    """Run one shard of a set-up ``stage`` over ``unit`` (skipped when done); return its stats.

    A model stage's call cache survives a killed or failed run; once the shard's outputs and
    marker are written it is removed. Each output table must match its declared schema
    (``SchemaMismatch`` naming stage, shard, table and column otherwise).
    """
    stage_dir = Path(stage_dir)
    done = done_shard_stats(stage_dir, shard)
    if done is not None:
        return done
    if stage.resources is None:
        return run_shard(stage_dir, shard, lambda: _checked(stage, shard, unit, None))
    cache_path = call_cache_path(stage_dir, shard)
    with CallCache(cache_path, fingerprint=stage.fingerprint()) as cache:
        stats = run_shard(stage_dir, shard, lambda: _checked(stage, shard, unit, cache))
    clear_shard_scratch(cache_path)
    return stats


def _checked(stage: Stage, shard: int, unit: Any, cache: CallCache | None) -> StageResult:
    """The stage's result for one shard, each output table checked against its declared schema."""
    result = stage.process(stage.read(unit), ShardContext(shard, cache, unit))
    result.outputs = {
        table: check_table(data, stage.output_schema(table), f"stage {stage.name!r} shard {shard} table {table!r}")
        for table, data in result.outputs.items()
    }
    if cache is not None:
        result.extra.setdefault("calls_cached", cache.hits)
        result.extra.setdefault("calls_made", cache.misses)
    return result
