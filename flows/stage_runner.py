"""The one stage runner: any ``Stage`` (reasonvqa/stage_contract.py) over its units, one Prefect task each.

``run_stage(StageClass, config, stage_dir, units)`` (or ``start_stage(...)`` then ``.wait()``, to let a
stage's shards run beside later stages) submits one task per unit, named by stage: ``<stage>-shard-NNNNN``
(dashes for underscores; the build labels the sources stage ``read-<kind>``, a streaming stage, so a unit
runs as ``read-<kind>-unit-NNNNN``), at most ``in_flight`` unfinished at once, with a progress bar. Each
task rebases its work-folder paths onto its process's mirror (``workstore.portable``), skips a finished
shard by its marker, sets the stage up once per worker process and writes outputs, rejects, stats and
marker (``reasonvqa.stage``). When every unit is done (or one failed) the stage is torn down in each
process that may have set it up: the flow's (its threads, and a ``runner_for_endpoint`` pool) and, on
Dask, every worker (``client.run``). ``run_partition_steps`` uses the same scheduler for the partitioned
release's per-file steps, which are not stages.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.callables import get_call_parameters
from pydantic import BaseModel

from reasonvqa import progress, workstore
from reasonvqa.stage_contract import Stage, run_unit, teardown_stage


@task(name="stage-shard", cache_policy=NO_CACHE)
@workstore.portable
def stage_shard(stage: type[Stage], config: BaseModel | None, device: str | None, stage_dir: Path, number: int,
                unit: Any) -> dict | list[dict]:
    """One unit of ``stage``: its shard's stats (a streaming stage: its shards' stats)."""
    return run_unit(stage, config, device, stage_dir, number, unit)


def local_slots() -> int | None:
    """The cores of this machine plus one when the flow's tasks run on its thread pool, else None (a
    Dask cluster schedules by its own workers). CPU-bound shards beyond that only add memory: each
    one in flight holds its tables (30 shards of 5,000 images at once held 3.3 GB); the one extra
    keeps a core busy while a shard waits on Parquet or the Prefect API (2 cores: 3 in flight was
    7 % faster than 2 at 4.6 M questions)."""
    context = FlowRunContext.get()
    if context is None or isinstance(context.task_runner, ThreadPoolTaskRunner):
        return (os.cpu_count() or 1) + 1
    return None


@dataclass
class StageRun:
    """A stage whose units are submitted; ``wait`` collects them and tears the stage down."""

    stage: type[Stage]
    futures: list[PrefectFuture]
    pending: list[PrefectFuture]
    advance: Callable[[int], None]
    bar: contextlib.ExitStack
    remote_workers: bool
    done: list[Any] = field(default_factory=list)

    def wait(self) -> list[dict]:
        """Every unit's stats in unit order (a streaming stage's shards flattened); the stage torn down
        once its units are done or one failed."""
        try:
            wait_all(self.pending, self.advance)
            results = [f.result() for f in self.futures]
        finally:
            self.bar.close()
            teardown_everywhere(self.stage, self.remote_workers)
        if self.stage.streams:
            return [stats for unit in results for stats in unit]
        return results


def start_stage(stage: type[Stage], config: BaseModel | None, stage_dir: Path, units: Iterable[Any] | dict[int, Any],
                *, in_flight: int | None = None, runner: TaskRunner | None = None, device: str | None = None,
                label: str | None = None) -> StageRun:
    """Submit one task per unit (a list: numbered 0.., a dict: by its keys) and return without waiting
    unless ``in_flight`` bounds the unfinished tasks. ``runner``: a started task runner to submit on instead
    of the flow's (``runner_for_endpoint``). ``label`` (default: the stage's name, dashes for underscores) names
    the progress bar, the task (``<label>-shard``, a streaming stage's ``<label>-unit``) and its runs
    (``<label>-shard-NNNNN``)."""
    numbered = sorted(units.items()) if isinstance(units, dict) else list(enumerate(units))
    label = label or stage.name.replace("_", "-")
    task_name = f"{label}-unit" if stage.streams else f"{label}-shard"
    shard_task = stage_shard.with_options(name=task_name, task_run_name=f"{task_name}-{{number:05d}}")
    submit: Callable[..., Any]
    if runner is None:
        submit = shard_task.submit
    else:
        def submit_on_runner(*args: Any) -> Any:
            return runner.submit(shard_task, get_call_parameters(shard_task.fn, args, {}))
        submit = submit_on_runner
    bar = contextlib.ExitStack()
    advance = bar.enter_context(progress.stage(label, len(numbered)))
    run = StageRun(stage, [], [], advance, bar, runner is None and dask_client() is not None)
    try:
        submit_bounded(submit, [(stage, config, device, Path(stage_dir), number, unit) for number, unit in numbered],
                       in_flight, run.futures, run.pending, advance)
    except BaseException:
        bar.close()
        teardown_everywhere(stage, run.remote_workers)
        raise
    return run


def run_stage(stage: type[Stage], config: BaseModel | None, stage_dir: Path, units: Iterable[Any] | dict[int, Any],
              **options: Any) -> list[dict]:
    """``start_stage(...).wait()``: every unit's stats, the stage torn down."""
    return start_stage(stage, config, stage_dir, units, **options).wait()


def teardown_everywhere(stage: type[Stage], remote_workers: bool) -> None:
    """Tear ``stage`` down in this process and, when its tasks ran on a Dask cluster, on every worker."""
    teardown_stage(stage)
    client = dask_client() if remote_workers else None
    if client is not None:
        try:
            client.run(teardown_stage, stage)
        except Exception as error:  # the workers tear it down when they exit; the stage's work is done
            get_run_logger().warning("could not tear stage %r down on the Dask workers: %s", stage.name, error)


def dask_client() -> Any:
    """The Dask client of the flow's task runner (prefect-dask's), or None (threads, or no flow)."""
    context = FlowRunContext.get()
    return getattr(context.task_runner, "_client", None) if context is not None else None


def _partition_step_name(parameters: dict[str, Any]) -> str:
    """``partition-<step function>``, e.g. ``partition-spill_file`` (a task run named by what it does)."""
    return f"partition-{getattr(parameters['fn'], '__name__', 'step')}"


@task(name="partition-step", task_run_name=_partition_step_name,  # type: ignore[arg-type]  # Prefect's callback protocol has a classmethod no function has
      cache_policy=NO_CACHE)
def partition_step(fn: Callable, args: tuple) -> Any:
    """One per-file or per-partition step of the on-disk release path (tasks/balance/partitioned.py)."""
    return fn(*args)


def run_partition_steps(fn: Callable, calls: list[tuple]) -> list:
    """``partitioned.Mapper`` of the flow: one ``partition-step`` task per call on the flow's task runner,
    all submitted at once. The steps are not stages: they share spill files and return values to the
    planner, so they have no markers or tables of their own; they share the runner's scheduler."""
    futures: list[PrefectFuture] = []
    pending: list[PrefectFuture] = []
    with progress.stage("partition", len(calls)) as advance:
        submit_bounded(partition_step.submit, [(fn, args) for args in calls], None, futures, pending, advance)
        wait_all(pending, advance)
    return [f.result() for f in futures]


def submit_bounded(submit: Callable[..., PrefectFuture], calls: Iterable[tuple], in_flight: int | None,
                   futures: list[PrefectFuture], pending: list[PrefectFuture], advance: Callable[[int], None]) -> None:
    """Submit one call per argument tuple into ``futures``, at most ``in_flight`` of ``pending`` unfinished
    (None: no bound: return at once), advancing the bar per call found finished."""
    for args in calls:
        if in_flight is not None and len(pending) >= in_flight:
            finished = next(as_completed(pending))
            finished.result()
            pending.remove(finished)
            advance(1)
        futures.append(submit(*args))
        pending.append(futures[-1])


def wait_all(pending: list[PrefectFuture], advance: Callable[[int], None]) -> None:
    """Wait for every pending call as it finishes (its error raised), advancing the bar."""
    for future in as_completed(pending):
        future.result()
        advance(1)
