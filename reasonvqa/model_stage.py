"""Stages that hold models: set up once per worker process, declare resources, cache calls.

A model stage (a tagger, a detector, a segmenter, an LLM or VLM client, an embedder) is a
class::

    class BoxProposals(ModelStage):
        name = "proposals"
        resources = Resources(device="cuda", memory_mb=8000)

        def setup(self) -> None:          # once per worker process: load weights on self.device
            self.model = load(self.config.weights, device=self.device)

        def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
            for batch in batches(inputs["images"], self.batch_size):
                boxes = ctx.cache.call("detect", {"image": ..., "prompt": ...}, lambda: self.detect(...))
            ...

``instance(StageClass, config)`` returns the worker's one set-up instance for that class and
config (weights are loaded once, not per shard). ``run_model_shard`` runs one shard under the
shard runner of ``reasonvqa.stage`` with a per-shard ``CallCache``: every finished call's result
is on disk before the next call starts, so a rerun of a killed shard repeats no finished call.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal

import pyarrow as pa
from pydantic import BaseModel

from reasonvqa.stage import StageResult, clear_shard_scratch, is_done, part_name, run_shard


@dataclass(frozen=True)
class Resources:
    """What one worker of a stage needs: the device kind and an estimate of its memory."""

    device: Literal["cpu", "cuda"] = "cpu"
    memory_mb: int = 512


def canonical_key(namespace: str, key: Any) -> str:
    """sha256 of a call's namespace and JSON-serializable inputs (sorted keys)."""
    text = json.dumps([namespace, key], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class CallCache:
    """Append-only on-disk record of finished calls of one shard, keyed by the call's inputs.

    Results must be JSON-serializable. Each finished call is appended as one JSON line and
    flushed with fsync before ``call`` returns, so a process killed at any point loses at most
    the call in flight; a torn last line (killed mid-write) is ignored on reload.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._entries: dict[str, Any] = {}
        self._lock = threading.Lock()
        if self.path.exists():
            with self.path.open("r", encoding="utf-8") as handle:
                for line in handle:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a torn write of a killed process: that call runs again
                    self._entries[entry["k"]] = entry["v"]

    def __len__(self) -> int:
        return len(self._entries)

    def has(self, namespace: str, key: Any) -> bool:
        """True when the call (namespace, key) has a recorded result."""
        with self._lock:
            return canonical_key(namespace, key) in self._entries

    def call(self, namespace: str, key: Any, compute: Callable[[], Any]) -> Any:
        """The cached result of ``compute`` for (namespace, key), computing and recording it once."""
        digest = canonical_key(namespace, key)
        with self._lock:
            if digest in self._entries:
                self.hits += 1
                return self._entries[digest]
        value = compute()
        line = json.dumps({"k": digest, "v": value}, sort_keys=True, separators=(",", ":")) + "\n"
        with self._lock:
            self.misses += 1
            self._entries[digest] = json.loads(line)["v"]  # what a reload would return
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            return self._entries[digest]


@dataclass
class ShardContext:
    """What a model stage gets besides its inputs: the shard number and its call cache."""

    shard: int
    cache: CallCache


class ModelStage(ABC):
    """A stage whose work needs a loaded model or a client. See the module docstring."""

    name: ClassVar[str]
    resources: ClassVar[Resources] = Resources()
    batch_size: ClassVar[int] = 1

    def __init__(self, config: BaseModel | None = None, device: str | None = None) -> None:
        self.config = config
        self.device = device or self.resources.device

    def setup(self) -> None:
        """Load weights or open clients (once per worker process). Default: nothing."""

    def teardown(self) -> None:
        """Release what ``setup`` took. Default: nothing."""

    @abstractmethod
    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        """Compute one shard's result from its input tables."""


_INSTANCES: dict[tuple[type, str, str | None], ModelStage] = {}
_INSTANCES_LOCK = threading.Lock()


def instance(stage: type[ModelStage], config: BaseModel | None = None, device: str | None = None) -> ModelStage:
    """The worker process's one set-up instance of ``stage`` for this config and device."""
    key = (stage, config.model_dump_json() if config is not None else "", device)
    with _INSTANCES_LOCK:
        found = _INSTANCES.get(key)
        if found is None:
            found = stage(config, device)
            found.setup()
            _INSTANCES[key] = found
        return found


@atexit.register
def teardown_all() -> None:
    """Tear down every set-up instance of this process (also run at interpreter exit)."""
    with _INSTANCES_LOCK:
        for stage in _INSTANCES.values():
            stage.teardown()
        _INSTANCES.clear()


def call_cache_path(stage_dir: Path, shard: int) -> Path:
    """Where one shard keeps its finished calls until the shard is done."""
    return Path(stage_dir) / "_calls" / f"{part_name(shard)}.jsonl"


def run_model_shard(stage_dir: Path, shard: int, stage: ModelStage, read_inputs: Callable[[], dict[str, pa.Table]]) -> dict:
    """Run one shard of a model stage (skipped when done); return its stats.

    The call cache survives a killed run; once the shard's outputs and marker are written it
    is no longer needed and is removed.
    """
    stage_dir = Path(stage_dir)
    if is_done(stage_dir, shard):
        return run_shard(stage_dir, shard, lambda: None)  # type: ignore[arg-type, return-value]
    cache = CallCache(call_cache_path(stage_dir, shard))

    def compute() -> StageResult:
        result = stage.process(read_inputs(), ShardContext(shard, cache))
        result.extra.setdefault("calls_cached", cache.hits)
        result.extra.setdefault("calls_made", cache.misses)
        return result

    stats = run_shard(stage_dir, shard, compute)
    clear_shard_scratch(call_cache_path(stage_dir, shard))
    return stats
