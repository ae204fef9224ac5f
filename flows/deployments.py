"""Serve build-reasonvqa (and resplit) as deployments: `prefect deployment run 'build-reasonvqa/<name>'`."""

from __future__ import annotations

from prefect import serve

from reasonvqa.config import BuildConfig


def serve_build(name: str, config: BuildConfig, out: str, cron: str | None = None) -> None:
    """Register `build-reasonvqa/<name>` (optionally on a cron schedule) and run it when triggered.

    Blocks, polling the Prefect API like `flow.serve`; parameters given with
    `prefect deployment run ... --param` override the defaults stored here.
    """
    from reasonvqa.flows.build_reasonvqa import build_reasonvqa
    from reasonvqa.flows.resplit import resplit_flow

    build = build_reasonvqa.to_deployment(
        name=name, cron=cron, parameters={"config": config.model_dump(mode="json"), "out": out}
    )
    resplit = resplit_flow.to_deployment(name=name)
    serve(build, resplit)
