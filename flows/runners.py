"""Task runners for the flows: threads on one machine (default) or a Dask cluster."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from prefect.task_runners import ThreadPoolTaskRunner

from reasonvqa.loopback import is_loopback


def make_task_runner(dask_workers: int = 0, dask_address: str | None = None):
    """A Dask runner when workers or a scheduler address are given, else a thread pool.

    Outputs do not depend on the runner (shards are independent and written by index),
    so it is not part of the build config or its hash.
    """
    if not dask_workers and not dask_address:
        return ThreadPoolTaskRunner()
    from prefect_dask import DaskTaskRunner

    if dask_address:
        return DaskTaskRunner(address=dask_address)
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={"n_workers": dask_workers, "processes": True, "threads_per_worker": 1,
                        "dashboard_address": None},
    )


def may_run_elsewhere(runner: Any) -> bool:
    """Whether ``runner``'s tasks may run on other hosts: a Dask cluster given by its scheduler address.
    A LocalCluster that the runner starts itself (``dask_workers``) has its workers on this machine."""
    return getattr(runner, "address", None) is not None


@contextlib.contextmanager
def runner_for_endpoint(runner: Any, endpoint: str) -> Iterator[ThreadPoolTaskRunner | None]:
    """The runner for tasks that query ``endpoint``: None (the flow's own ``runner``), or, when the
    endpoint is on this machine's loopback and ``runner``'s workers may be on other hosts (where
    127.0.0.1 is not this machine), a thread pool in the flow's process, started for the block.
    Those tasks are SPARQL calls, batched per shard: the server does the work, the threads wait on it."""
    if not (is_loopback(endpoint) and may_run_elsewhere(runner)):
        yield None
        return
    local: ThreadPoolTaskRunner[Any]
    with ThreadPoolTaskRunner(max_workers=(os.cpu_count() or 1) + 1) as local:
        yield local
