"""Model stages used by the stage contract and runner tests, importable by subprocesses and Dask workers.

``python -m tests.reasonvqa.stage_fixtures STAGE_DIR`` runs shard 0 of ``HashingStage``
over the numbers 0..N-1 (N from ``MODEL_STAGE_TEST_N``). Each call of its per-call function
appends its number to the file ``MODEL_STAGE_TEST_CALLS``; with ``MODEL_STAGE_TEST_STOP_AT=k``
the call for k writes the file ``MODEL_STAGE_TEST_READY`` and then hangs (to be killed).
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa

from reasonvqa.stage_contract import Stage, ModelStageConfig, Resources, ShardContext, instance, run_stage_shard
from reasonvqa.stage import Rejects, StageResult

HASHED = pa.schema([("n", pa.int64()), ("digest", pa.binary()), ("rounds", pa.list_(pa.int64()))])


class HashingStage(Stage):
    """Hashes each number (one cached call per number); odd multiples of 7 are rejected."""

    name = "hashing"
    resources = Resources(device="cpu", memory_mb=64)
    inputs = {"numbers": pa.schema([("n", pa.int64())])}
    outputs = {"hashed": HASHED}

    def digest(self, n: int) -> dict:
        with open(os.environ["MODEL_STAGE_TEST_CALLS"], "a", encoding="utf-8") as log:
            log.write(f"{n}\n")
        if os.environ.get("MODEL_STAGE_TEST_STOP_AT") == str(n):
            Path(os.environ["MODEL_STAGE_TEST_READY"]).write_text("ready")
            time.sleep(600)
        return {"digest": hashlib.sha256(str(n).encode()).digest(), "rounds": [n, n * n]}

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        rejects = Rejects(self.name, ctx.shard)
        rows = []
        for n in inputs["numbers"]["n"].to_pylist():
            if n % 14 == 7:
                rejects.add("odd_multiple_of_seven", f"numbers#{n}", {"n": n})
                continue
            answer = ctx.cache.call("digest", {"n": n}, lambda n=n: self.digest(n))
            rows.append({"n": n, **answer})
        return StageResult({"hashed": pa.Table.from_pylist(rows, schema=HASHED)}, rejects, rows_in=len(inputs["numbers"]))


class EventsConfig(ModelStageConfig):
    events: str  # file the stage appends its lifecycle events to


def record_event(config: EventsConfig, event: str) -> None:
    with open(config.events, "a", encoding="utf-8") as handle:
        handle.write(f"{event} {os.getpid()} {threading.get_ident()}\n")


class LifecycleStage(Stage):
    """Records setup, process and teardown with process and thread ids; echoes its input."""

    name = "lifecycle"
    resources = Resources(device="cpu", memory_mb=64)
    inputs = {"numbers": pa.schema([("n", pa.int64())])}
    outputs = {"numbers": pa.schema([("n", pa.int64())])}

    def setup(self) -> None:
        record_event(self.config, "setup")
        time.sleep(0.3)  # a slow load: concurrent first calls must still set up once

    def teardown(self) -> None:
        record_event(self.config, "teardown")

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        record_event(self.config, f"process-{ctx.shard}")
        time.sleep(0.1)
        return StageResult({"numbers": inputs["numbers"]}, Rejects(self.name, ctx.shard), rows_in=len(inputs["numbers"]))


def set_up_lifecycle(events: str) -> int:
    """Set up ``LifecycleStage`` in this process (a pool worker); return the process id."""
    instance(LifecycleStage, EventsConfig(events=events))
    return os.getpid()


def read_events(path: Path) -> list[tuple[str, int, int]]:
    """(event, pid, thread id) per line of an events file."""
    rows = [line.split() for line in Path(path).read_text().splitlines()]
    return [(event, int(pid), int(thread)) for event, pid, thread in rows]


def main(stage_dir: str) -> None:
    numbers = pa.table({"n": pa.array(range(int(os.environ["MODEL_STAGE_TEST_N"])), pa.int64())})
    run_stage_shard(Path(stage_dir), 0, instance(HashingStage), {"numbers": numbers})


if __name__ == "__main__":
    main(sys.argv[1])
