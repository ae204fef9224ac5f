"""Serve build-reasonvqa and resplit as deployments: `prefect deployment run 'build-reasonvqa/<name>'`.

`reasonvqa serve --name N` registers ``build-reasonvqa/N`` and ``resplit/N`` and runs them in its own
process, with no work pool. A deployment of the same name that `prefect deploy` made from prefect.yaml
(it names a work pool, and a worker runs it) is not replaced unless asked (``replace``); replacing deletes
it first, since registering over it would keep its work pool (Prefect's upsert leaves fields it is not
given) and its worker would take the served deployment's runs too.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from prefect import serve
from prefect.client.schemas.responses import DeploymentResponse

from reasonvqa.errors import UsageError
from reasonvqa.flows.config import BuildConfig

FLOWS = ("build-reasonvqa", "resplit")  # the flows `serve` registers a deployment of


def served_names(name: str) -> list[str]:
    """The deployments ``serve_build(name, ...)`` registers, as ``<flow>/<deployment>``."""
    return [f"{flow}/{name}" for flow in FLOWS]


def checked_schedule(cron: str, timezone: str) -> None:
    """Raise UsageError unless ``timezone`` is an IANA time zone name (e.g. UTC, Europe/Paris) and ``cron``
    a cron expression Prefect accepts."""
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--timezone: {timezone!r} is not an IANA time zone name (e.g. UTC, Europe/Paris)") from None
    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as exc:
        reasons = "; ".join(error["msg"] for error in exc.errors())
        raise UsageError(f"--cron: {cron!r} is not a cron expression ({reasons})") from None


def pool_deployments(names: list[str]) -> dict[str, DeploymentResponse]:
    """Of ``names``, the deployments that exist on the Prefect API with a work pool (made by `prefect deploy`,
    e.g. from prefect.yaml), by name."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    found = {}
    with get_client(sync_client=True) as client:
        for name in names:
            try:
                deployment = client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if deployment.work_pool_name:
                found[name] = deployment
    return found


def refuse_replacing_pool_deployments(name: str) -> None:
    """Raise UsageError when ``serve_build(name, ...)`` would replace a deployment a work pool runs."""
    taken = pool_deployments(served_names(name))
    if taken:
        listed = ", ".join(f"{deployment} (work pool {found.work_pool_name!r})"
                           for deployment, found in sorted(taken.items()))
        raise UsageError(f"{listed} exists, made by `prefect deploy` (prefect.yaml); serving --name {name} would "
                         "replace it: choose another --name, or give --replace")


def delete_pool_deployments(name: str) -> list[str]:
    """Delete the deployments a work pool runs that ``serve_build(name, ...)`` registers (with their scheduled
    runs); the names deleted."""
    from prefect.client.orchestration import get_client

    taken = pool_deployments(served_names(name))
    with get_client(sync_client=True) as client:
        for found in taken.values():
            client.delete_deployment(found.id)
    return sorted(taken)


def serve_build(name: str, config: BuildConfig, out: str, cron: str | None = None, timezone: str = "UTC",
                replace: bool = False) -> None:
    """Register `build-reasonvqa/<name>` (on ``cron`` in ``timezone``, if given) and `resplit/<name>`, and run
    them when triggered.

    Blocks, polling the Prefect API like `flow.serve`; parameters given with
    `prefect deployment run ... --param` override the defaults stored here. Without ``replace``, a
    deployment of either name that a work pool runs (from prefect.yaml) is refused (UsageError); with it,
    that deployment is deleted and the served one registered in its place (a new id, no work pool).
    """
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Cron

    from reasonvqa.flows.build_reasonvqa import build_reasonvqa
    from reasonvqa.flows.resplit import resplit_flow

    if cron:
        checked_schedule(cron, timezone)
    if replace:
        delete_pool_deployments(name)
    else:
        refuse_replacing_pool_deployments(name)
    build = build_reasonvqa.to_deployment(
        name=name, schedules=[Cron(cron, timezone=timezone)] if cron else None,
        parameters={"config": config.model_dump(mode="json"), "out": out},
    )
    resplit = resplit_flow.to_deployment(name=name)
    # to_deployment is async-dispatched (typed deployment | coroutine): called outside an event loop it returns the deployment
    assert isinstance(build, RunnerDeployment) and isinstance(resplit, RunnerDeployment)
    serve(build, resplit)
