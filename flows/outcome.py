"""The final state of a deployment's flow run: what it wrote, or in one line why it failed.

A deployment run is watched with `prefect deployment run ... --watch` or in the UI, which show the
flow run's state and events, not the worker's log. So a flow ends in ``Completed`` whose message names
the folder it wrote, or in ``Failed`` whose message is the one-line reason (exception type and
message, newlines folded). The same line goes to the run's log and, as the name of an event
``reasonvqa.run.completed`` / ``reasonvqa.run.failed`` related to the flow run, to what ``--watch``
prints: it shows the run's events but not its logs (a Prefect server streams logs out only with
PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED, off by default), and its last line names the state only.

Calling the flow directly still returns the value (``state.result()``) or raises the exception
itself, so the command line keeps its own error handling.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from prefect import get_run_logger
from prefect.states import Completed, Failed, State

from reasonvqa.errors import one_line

T = TypeVar("T")


def failure_reason(exc: BaseException) -> str:
    """``<ExceptionType>: <message on one line>``: the failed state's message."""
    return f"{type(exc).__name__}: {one_line(exc)}"


def reported(work: Callable[[], T], done: Callable[[T], str]) -> State:
    """Run ``work``; Completed with message ``done(result)`` and the result as data, or Failed with
    the one-line reason (the exception kept as data, so a direct call raises it)."""
    logger = get_run_logger()
    try:
        result = work()
    except Exception as exc:  # the reason goes in the state; the traceback stays in the run's log
        reason = failure_reason(exc)
        logger.error(reason, exc_info=exc)
        announce("failed", reason)
        return Failed(message=reason, data=exc)
    message = done(result)
    logger.info(message)
    announce("completed", message)
    return Completed(message=message, data=result)


def announce(outcome: str, message: str) -> None:
    """Send the event ``reasonvqa.run.<outcome>`` named ``message``, related to this flow run, before the run's
    final state is set (so a watcher of the run sees it before the state that ends its watch)."""
    from uuid import uuid4

    from prefect.context import FlowRunContext
    from prefect.events.clients import get_events_client
    from prefect.events.schemas.events import Event, RelatedResource, Resource
    from prefect.utilities.asyncutils import run_coro_as_sync

    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return
    run = context.flow_run
    event = Event(id=uuid4(), event=f"reasonvqa.run.{outcome}",  # occurred: now, in UTC (the field's default)
                  resource=Resource({"prefect.resource.id": f"reasonvqa.run-outcome.{run.id}", "prefect.resource.name": message}),
                  related=[RelatedResource({"prefect.resource.id": f"prefect.flow-run.{run.id}", "prefect.resource.role": "flow-run",
                                            "prefect.resource.name": run.name})])

    async def send() -> None:  # at once, not through the events worker's queue
        async with get_events_client() as client:
            await client.emit(event)

    run_coro_as_sync(send())
