"""Task runners for the flows: threads on one machine (default) or a Dask cluster."""

from __future__ import annotations

from prefect.task_runners import ThreadPoolTaskRunner


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
