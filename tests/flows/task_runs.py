"""The names of the task runs a flow recorded on this process's Prefect API (tests/conftest.py's ``prefect_api``)."""

from __future__ import annotations

from tests.waiting import until


def task_run_names(flow_name: str, expected: set[str], timeout_s: float = 60.0) -> set[str]:
    """Every task-run name of the flow runs named ``flow_name``, once ``expected`` are all among them (task runs
    reach the API as events, recorded a moment later); whatever is there after ``timeout_s`` otherwise."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    seen: set[str] = set()

    def recorded() -> bool:
        seen.clear()
        read = 0
        with get_client(sync_client=True) as client:
            while page := client.read_task_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                                                limit=200, offset=read):  # the API's page limit
                seen.update(run.name for run in page)
                read += len(page)
        return expected <= seen

    try:
        until(recorded, timeout_s=timeout_s, every_s=1.0, what=f"task runs {sorted(expected)} of {flow_name}")
    except AssertionError:
        pass  # the caller's assertion shows which names are there
    return set(seen)
