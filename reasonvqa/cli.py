"""The `reasonvqa` command line: one command per flow or tool, thin over the same functions."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(help="Build knowledge-based VQA datasets (ReasonVQA style) as Prefect flows.",
                  no_args_is_help=True, add_completion=False)
sources_app = typer.Typer(help="Read source datasets.", no_args_is_help=True)
link_app = typer.Typer(help="Link objects to Wikidata.", no_args_is_help=True)
app.add_typer(sources_app, name="sources")
app.add_typer(link_app, name="link")


def _quiet_prefect() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # the temporary API server a flow starts when none is configured needs >20 s on a busy 2-core machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _split_list(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


@app.command()
def build(
    sample: Annotated[bool, typer.Option("--sample", help="Build from the bundled sample data.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False,
                                                   help="BuildConfig YAML file.")] = None,
    out: Annotated[Path, typer.Option(help="Output folder; the release goes to OUT/<name>/<version>/.")] = Path("out"),
    domains: Annotated[Optional[str], typer.Option(help='Comma-separated domains, e.g. "Places & Locations".')] = None,
    work: Annotated[Optional[Path], typer.Option(help="Work folder (default OUT/.work/<hash of config, inputs and code>).")] = None,
    version: Annotated[Optional[str], typer.Option(help="Release version (overrides the config).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing release version.")] = False,
    dask_workers: Annotated[int, typer.Option(help="Run shards on a local Dask cluster of N processes.")] = 0,
    dask_address: Annotated[Optional[str], typer.Option(help="Run shards on an existing Dask scheduler.")] = None,
) -> None:
    """Run the build-reasonvqa flow and print the release folder."""
    from reasonvqa.config import load_config, sample_config

    if sample == (config is not None):
        raise typer.BadParameter("give exactly one of --sample or --config FILE")
    cfg = sample_config() if sample else load_config(config)
    if domains is not None:
        cfg.questions.domains = _split_list(domains)
    if version is not None:
        cfg.release.version = version
    missing = [f"{s.kind}: {s.path}" for s in cfg.sources if not s.path.is_dir()]
    if missing:
        typer.echo(f"error: source folder not found: {'; '.join(missing)}", err=True)
        raise typer.Exit(2)
    _quiet_prefect()
    from flows.build_reasonvqa import build_reasonvqa
    from flows.runners import make_task_runner
    from tasks.release.writer import ReleaseExistsError

    runner = make_task_runner(dask_workers, dask_address)
    try:
        release = build_reasonvqa.with_options(task_runner=runner)(cfg, str(out), str(work) if work else None, overwrite)
    except (FileNotFoundError, ReleaseExistsError) as exc:  # a missing input file, or a version already taken
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(release)


@app.command()
def verify(release_dir: Annotated[Path, typer.Argument(help="A release folder (with manifest.json).")]) -> None:
    """Check a release's schema, checksums, counts and invariants; exit 1 on any problem."""
    from tasks.release.verify import verify_release

    problems = verify_release(release_dir)
    for problem in problems:
        typer.echo(f"FAIL {problem}", err=True)
    if problems:
        raise typer.Exit(1)
    typer.echo(f"OK {release_dir}")


@app.command()
def resplit(
    source: Annotated[Path, typer.Argument(help="A release folder to re-split.")],
    out: Annotated[Path, typer.Option(help="Output folder for the new release version.")] = Path("out"),
    domains: Annotated[Optional[str], typer.Option(help="Comma-separated domains to keep.")] = None,
    sources: Annotated[Optional[str], typer.Option(help="Comma-separated image sources to keep (vg, gldv2).")] = None,
    hops: Annotated[Optional[str], typer.Option(help="Comma-separated hop counts to keep, e.g. 2,3.")] = None,
    version: Annotated[Optional[str], typer.Option(help="Version of the new release.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed (default: the source release's).")] = None,
    domain_match: Annotated[str, typer.Option(
        help="route: every property on the question's route is in a selected domain (as a build with "
             "--domains); any: tagged with a selected domain; all: every tag selected.")] = "route",
) -> None:
    """Filter, re-balance and re-split a release without touching the network."""
    from flows.resplit import SourceReleaseError, resplit as run_resplit
    from tasks.balance.filters import EmptySelectionError

    if domain_match not in ("route", "any", "all"):
        raise typer.BadParameter("--domain-match is one of route, any, all")
    hop_list = [int(h) for h in _split_list(hops)] if hops else None
    try:
        path = run_resplit(source, out, domains=_split_list(domains), sources=_split_list(sources),
                           hops=hop_list, version=version, seed=seed, domain_match=domain_match)
    except (EmptySelectionError, SourceReleaseError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(path)


@app.command()
def serve(
    name: Annotated[str, typer.Option(help="Deployment name: runs as 'build-reasonvqa/<name>'.")],
    sample: Annotated[bool, typer.Option("--sample", help="Default parameters: the bundled sample.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False)] = None,
    out: Annotated[Path, typer.Option(help="Default output folder of the deployment.")] = Path("out"),
    cron: Annotated[Optional[str], typer.Option(help='Rebuild schedule, e.g. "0 3 * * 1".')] = None,
) -> None:
    """Serve build-reasonvqa and resplit as deployments (blocks; needs a Prefect API)."""
    from reasonvqa.config import load_config, sample_config

    if sample == (config is not None):
        raise typer.BadParameter("give exactly one of --sample or --config FILE")
    _quiet_prefect()
    from flows.deployments import serve_build

    serve_build(name, sample_config() if sample else load_config(config), str(out.resolve()), cron)


@sources_app.command("scan")
def sources_scan(
    source: Annotated[str, typer.Option("--source", help="vg or gldv2")],
    path: Annotated[Path, typer.Option("--path", help="Folder holding the source files.")],
) -> None:
    """Read a source dataset and print a JSON summary (images, objects, relations, rejects)."""
    from tasks.sources.scan import scan_source

    try:
        summary = scan_source(source, path)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(json.dumps(summary, indent=2, sort_keys=True))


@link_app.command("synsets")
def link_synsets(names: Annotated[list[str], typer.Argument(help="WordNet 3.0 synset names, e.g. dog.n.01")]) -> None:
    """Link WordNet 3.0 synsets to Wikidata items offline; one JSON line per synset."""
    from knowledge.config import KnowledgeConfig
    from knowledge.linking import link_synset_names

    for row in link_synset_names(list(names), KnowledgeConfig()):
        sys.stdout.write(json.dumps(row, sort_keys=True) + "\n")


if __name__ == "__main__":
    app()
