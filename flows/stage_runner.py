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

A ``cpu_bound`` stage with more than one unit, on the flow's thread runner, keeps its one task per unit, but
each task hands its unit's compute to worker processes (``ShardProcesses``: a spawn ``ProcessPoolExecutor`` of
up to one process per core, made per stage run and shut down at its teardown, which tears the stage down in
the workers). The worker runs ``run_unit``, so it writes the shard's files and marker and returns its stats;
a shard already done is answered by the task from its marker without a worker. On Dask nothing changes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import threading
import uuid
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.callables import get_call_parameters
from pydantic import BaseModel

from reasonvqa import progress, workstore
from reasonvqa.stage_contract import Stage, finished_unit, run_unit, teardown_stage


@task(name="stage-shard", cache_policy=NO_CACHE)
@workstore.portable
def stage_shard(stage: type[Stage], config: BaseModel | None, device: str | None, stage_dir: Path, number: int,
                unit: Any, processes: str | None = None) -> dict | list[dict]:
    """One unit of ``stage``: its shard's stats (a streaming stage: its shards' stats), computed here or, with
    ``processes`` (a ``ShardProcesses`` key), in one of that stage run's worker processes."""
    if processes is None:
        return run_unit(stage, config, device, stage_dir, number, unit)
    return ShardProcesses.compute(processes, stage, config, device, stage_dir, number, unit)


class WorkerDied(RuntimeError):
    """A worker process died (killed, out of memory) while it computed, or was about to compute, a shard."""


def compute_unit(stage: type[Stage], config: BaseModel | None, device: str | None, stage_dir: Path, number: int,
                 unit: Any) -> dict | list[dict]:
    """``run_unit`` in a worker process (paths rebased onto its mirror); an error that would not survive the
    trip back (an exception class that does not pickle) comes back as a RuntimeError with its type and text."""
    try:
        return workstore.portable(run_unit)(stage, config, device, stage_dir, number, unit)
    except Exception as error:
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            raise RuntimeError(f"{type(error).__qualname__}: {error}") from None
        raise


@dataclass
class ShardProcesses:
    """One stage run's worker processes (spawned on demand, at most ``size``), found by the key its tasks get."""

    size: int
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    executor: ProcessPoolExecutor | None = None

    _open: ClassVar[dict[str, ShardProcesses]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def start(cls, units: int) -> ShardProcesses:
        """Worker processes for ``units`` units: one per core at most, none started yet."""
        pool = cls(max(1, min(os.cpu_count() or 1, units)))
        # spawn, not fork: the flow's process has threads (Prefect's, the runner's) that a fork would copy mid-lock
        pool.executor = ProcessPoolExecutor(pool.size, mp_context=multiprocessing.get_context("spawn"))
        with cls._lock:
            cls._open[pool.key] = pool
        return pool

    def close(self) -> None:
        """Cancel what no worker started, wait for the rest, and let the workers exit (each tears the stage
        down as it exits: ``stage_contract``'s finalizer)."""
        with self._lock:
            self._open.pop(self.key, None)
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)

    @classmethod
    def compute(cls, key: str, stage: type[Stage], config: BaseModel | None, device: str | None, stage_dir: Path,
                number: int, unit: Any) -> dict | list[dict]:
        """Unit ``number``'s stats: from its marker when done, else computed by a worker process. A worker's
        error is raised as the worker raised it; a dead worker is a ``WorkerDied`` naming the shard."""
        done = finished_unit(stage, stage_dir, number)
        if done is not None:
            return done
        shard = f"stage {stage.name!r} shard {number:05d}"
        with cls._lock:
            pool = cls._open.get(key)
        try:
            if pool is None or pool.executor is None:
                raise RuntimeError("closed")
            future = pool.executor.submit(compute_unit, stage, config, device, stage_dir, number, unit)
        except RuntimeError as error:  # BrokenProcessPool included: an earlier shard's worker died
            raise RuntimeError(f"{shard}: not run, the stage's worker processes were shut down or one died "
                               "(another shard failed)") from error
        try:
            return future.result()
        except BrokenProcessPool as error:
            raise WorkerDied(f"{shard}: not written, a worker process of the stage died (killed, or out of memory) "
                             "while the shard ran or waited for one; a rerun resumes at the shards not written") from error
        except CancelledError:
            raise RuntimeError(f"{shard}: not run, the stage's worker processes were shut down "
                               "(another shard failed)") from None
        except Exception as error:
            error.add_note(f"({shard}, computed in a worker process)")
            raise


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
    processes: ShardProcesses | None = None
    done: list[Any] = field(default_factory=list)

    def wait(self) -> list[dict]:
        """Every unit's stats in unit order (a streaming stage's shards flattened); the stage torn down
        once its units are done or one failed."""
        try:
            wait_all(self.pending, self.advance)
            results = [f.result() for f in self.futures]
        finally:
            self.close()
        if self.stage.streams:
            return [stats for unit in results for stats in unit]
        return results

    def close(self) -> None:
        """Close the bar, shut the worker processes down and tear the stage down everywhere."""
        self.bar.close()
        try:
            if self.processes is not None:
                self.processes.close()
        finally:
            teardown_everywhere(self.stage, self.remote_workers)


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
        if in_processes(stage, runner, len(numbered)):
            run.processes = ShardProcesses.start(len(numbered))
        key = run.processes.key if run.processes is not None else None
        submit_bounded(submit, [(stage, config, device, Path(stage_dir), number, unit, key) for number, unit in numbered],
                       in_flight, run.futures, run.pending, advance)
    except BaseException:
        run.close()
        raise
    return run


def in_processes(stage: type[Stage], runner: TaskRunner | None, units: int) -> bool:
    """Whether ``stage``'s units compute in worker processes: a ``cpu_bound`` stage with more than one unit
    (one unit has nothing to run beside), its tasks on the flow's thread runner (Dask's workers are processes)."""
    context = FlowRunContext.get()
    return (stage.cpu_bound and units > 1 and runner is None and context is not None
            and isinstance(context.task_runner, ThreadPoolTaskRunner))


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
