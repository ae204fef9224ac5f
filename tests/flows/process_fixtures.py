"""A CPU-bound toy stage for the runner's worker-process tests, importable by spawned worker processes.

``SquaresStage`` squares each number of its shard, rejecting negative ones; it appends ``process-<shard>
<pid>`` to its config's events file per shard computed, records its process id in the shard's stats
(``pid``), and with ``fail_at`` raises naming file and record, with ``kill_at`` kills its own process.
"""

from __future__ import annotations

import os
import signal

import pyarrow as pa
from pydantic import BaseModel

from reasonvqa.stage import Rejects, StageResult
from reasonvqa.stage_contract import ShardContext, Stage

NUMBERS = pa.schema([("n", pa.int64())])
SQUARES = pa.schema([("n", pa.int64()), ("square", pa.int64())])


class SquaresConfig(BaseModel):
    events: str
    fail_at: int | None = None  # a number whose shard raises
    kill_at: int | None = None  # a number whose shard kills its worker process


class SquaresStage(Stage):
    name = "squares"
    cpu_bound = True
    inputs = {"numbers": NUMBERS}
    outputs = {"squares": SQUARES}

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        config: SquaresConfig = self.config  # type: ignore[assignment]
        with open(config.events, "a", encoding="utf-8") as events:
            events.write(f"process-{ctx.shard} {os.getpid()}\n")
        rejects = Rejects(self.name, ctx.shard)
        rows = []
        for record, n in enumerate(inputs["numbers"]["n"].to_pylist()):
            if n == config.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            if n == config.fail_at:
                raise ValueError(f"numbers-{ctx.shard}.parquet record {record}: {n} is unlucky")
            if n < 0:
                rejects.add("negative", f"numbers-{ctx.shard}.parquet#{record}", {"n": n})
            else:
                rows.append({"n": n, "square": n * n})
        return StageResult({"squares": pa.Table.from_pylist(rows, schema=SQUARES)}, rejects,
                           rows_in=len(inputs["numbers"]), extra={"pid": os.getpid()})


class SquaresOnThreads(SquaresStage):
    """The same stage computed on the flow's threads."""

    cpu_bound = False
