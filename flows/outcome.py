"""The final state of a deployment's flow run: what it wrote, or in one line why it failed.

A deployment run is watched with `prefect deployment run ... --watch` or in the UI, which show the
flow run's state and its log, not the worker's. So a flow ends in ``Completed`` whose message names
the folder it wrote, or in ``Failed`` whose message is the one-line reason (exception type and
message, newlines folded), also logged at ERROR so that ``--watch`` prints it.

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
        return Failed(message=reason, data=exc)
    message = done(result)
    logger.info(message)
    return Completed(message=message, data=result)
