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


def _domain_list(value: Optional[str], strict: bool) -> Optional[list[str]]:
    """Comma-separated domain names or slugs (any case) as the bank's domain names.

    ``strict``: an empty or unknown name exits 2 with the valid ones listed (a build). Otherwise
    an unknown name is kept as given (a re-split may filter by the domains of an older bank).
    """
    from reasonvqa.tasks.questions.bank import resolve_domain_names

    if value is None:
        return None
    names = [v.strip() for v in value.split(",")]
    if strict:
        try:
            return resolve_domain_names(names)
        except ValueError as exc:
            typer.echo(f"error: --domains: {exc}", err=True)
            raise typer.Exit(2)
    out = []
    for name in filter(None, names):
        try:
            out += resolve_domain_names([name])
        except ValueError:
            out.append(name)
    return out or None


@app.command()
def build(
    sample: Annotated[bool, typer.Option("--sample", help="Build from the bundled sample data.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False,
                                                   help="BuildConfig YAML file.")] = None,
    out: Annotated[Path, typer.Option(help="Output folder; the release goes to OUT/<name>/<version>/.")] = Path("out"),
    domains: Annotated[Optional[str], typer.Option(
        help='Comma-separated domains (names or slugs, any case), e.g. "Places & Locations,food".')] = None,
    work: Annotated[Optional[Path], typer.Option(help="Work folder (default OUT/.work/<hash of config, inputs and code>).")] = None,
    version: Annotated[Optional[str], typer.Option(help="Release version (overrides the config).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing release version.")] = False,
    dask_workers: Annotated[int, typer.Option(help="Run shards on a local Dask cluster of N processes.")] = 0,
    dask_address: Annotated[Optional[str], typer.Option(help="Run shards on an existing Dask scheduler.")] = None,
) -> None:
    """Run the build-reasonvqa flow and print the release folder."""
    from reasonvqa.config import sample_config

    if sample == (config is not None):
        raise typer.BadParameter("give exactly one of --sample or --config FILE")
    cfg = sample_config() if sample else _load_config_or_exit(config)
    if domains is not None:
        cfg.questions.domains = _domain_list(domains, strict=True)
    if version is not None:
        cfg.release.version = version
    _quiet_prefect()
    from reasonvqa.flows.build_reasonvqa import build_reasonvqa, check_build_inputs
    from reasonvqa.flows.runners import make_task_runner

    try:  # fail in a line, before Prefect starts, rather than in a task's traceback after minutes of work
        check_build_inputs(cfg)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    from reasonvqa.tasks.release.writer import EmptySplitError, ReleaseExistsError

    runner = make_task_runner(dask_workers, dask_address)
    try:
        release = build_reasonvqa.with_options(task_runner=runner)(cfg, str(out), str(work) if work else None, overwrite)
    except (FileNotFoundError, ReleaseExistsError, EmptySplitError) as exc:  # missing input, version taken, no questions
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(release)


def _load_config_or_exit(path: Path):
    """The BuildConfig in ``path``, or exit 2 with one error naming the file (no traceback)."""
    import yaml
    from pydantic import ValidationError

    from reasonvqa.config import load_config

    try:
        return load_config(path)
    except yaml.YAMLError as exc:
        typer.echo(f"error: {path}: invalid YAML: {exc}", err=True)
    except ValidationError as exc:  # bad values and unknown (e.g. misspelled) keys
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        typer.echo(f"error: {path}: invalid config: {problems}", err=True)
    raise typer.Exit(2)


def _hop_list(value: Optional[str]) -> Optional[list[int]]:
    items = _split_list(value)
    if items is None:
        return None
    bad = [h for h in items if not h.isdigit()]
    if bad:
        raise typer.BadParameter(f"hop counts are whole numbers such as 2,3; got {', '.join(map(repr, bad))}",
                                 param_hint="--hops")
    return [int(h) for h in items]


@app.command()
def verify(release_dir: Annotated[Path, typer.Argument(help="A release folder (with manifest.json).")]) -> None:
    """Check a release's schema, checksums, counts and invariants; exit 1 on any problem."""
    from reasonvqa.tasks.release.verify import verify_release

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
    from reasonvqa.flows.resplit import SourceReleaseError, resplit as run_resplit
    from reasonvqa.tasks.balance.filters import EmptySelectionError

    if domain_match not in ("route", "any", "all"):
        raise typer.BadParameter("--domain-match is one of route, any, all")
    hop_list = _hop_list(hops)
    try:
        path = run_resplit(source, out, domains=_domain_list(domains, strict=False), sources=_split_list(sources),
                           hops=hop_list, version=version, seed=seed, domain_match=domain_match)
    except (EmptySelectionError, SourceReleaseError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    _warn_empty_splits(Path(path))
    typer.echo(path)


def _warn_empty_splits(release: Path) -> None:
    counts = json.loads((release / "manifest.json").read_text(encoding="utf-8"))["counts"]
    for split in ("train", "test"):
        if counts.get(split) == 0:
            typer.echo(f"warning: {release}: split {split!r} is empty; datasets.load_dataset cannot load "
                       "an empty split (select more questions)", err=True)


@app.command()
def serve(
    name: Annotated[str, typer.Option(help="Deployment name: runs as 'build-reasonvqa/<name>'.")],
    sample: Annotated[bool, typer.Option("--sample", help="Default parameters: the bundled sample.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False)] = None,
    out: Annotated[Path, typer.Option(help="Default output folder of the deployment.")] = Path("out"),
    cron: Annotated[Optional[str], typer.Option(help='Rebuild schedule, e.g. "0 3 * * 1".')] = None,
) -> None:
    """Serve build-reasonvqa and resplit as deployments (blocks; needs a Prefect API)."""
    from reasonvqa.config import sample_config

    if sample == (config is not None):
        raise typer.BadParameter("give exactly one of --sample or --config FILE")
    cfg = sample_config() if sample else _load_config_or_exit(config)
    _quiet_prefect()
    from reasonvqa.flows.deployments import serve_build

    serve_build(name, cfg, str(out.resolve()), cron)


@sources_app.command("scan")
def sources_scan(
    source: Annotated[str, typer.Option("--source", help="vg or gldv2")],
    path: Annotated[Path, typer.Option("--path", help="Folder holding the source files.")],
) -> None:
    """Read a source dataset and print a JSON summary (images, objects, relations, rejects)."""
    from reasonvqa.tasks.sources.scan import scan_source

    try:
        summary = scan_source(source, path)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(json.dumps(summary, indent=2, sort_keys=True))


@link_app.command("synsets")
def link_synsets(names: Annotated[list[str], typer.Argument(help="WordNet 3.0 synset names, e.g. dog.n.01")]) -> None:
    """Link WordNet 3.0 synsets to Wikidata items offline; one JSON line per synset."""
    from reasonvqa.knowledge.config import KnowledgeConfig
    from reasonvqa.knowledge.linking import link_synset_names

    for row in link_synset_names(list(names), KnowledgeConfig()):
        sys.stdout.write(json.dumps(row, sort_keys=True) + "\n")


if __name__ == "__main__":
    app()
