"""The `reasonvqa` command line: one command per flow or tool, thin over the same functions."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional, cast

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from reasonvqa.errors import DATA_EXIT, USAGE_EXIT, UsageError, one_line


class OneLineErrors(TyperGroup):
    """Turns any exception of a command into one ``error:`` line (exit 2 usage, 1 otherwise);
    ``reasonvqa --debug`` re-raises it with its traceback."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except typer.TyperException as exc:  # a bad option before the command: one line too
            if "--debug" in args or not hasattr(exc, "format_message"):
                raise
            _click_error(exc)

    def invoke(self, ctx: typer.Context):  # type: ignore[override]  # typer's group passes its typer.Context; the base type is typer's private _click
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):  # exits
            raise
        except typer.TyperException as exc:  # a bad flag or value (Typer would draw a box): one line, exit 2
            if ctx.params.get("debug") or not hasattr(exc, "format_message"):
                raise
            _click_error(exc)
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            if isinstance(exc, UsageError):
                typer.echo(f"error: {one_line(exc)}", err=True)
                raise typer.Exit(USAGE_EXIT) from None
            typer.echo(f"error: {type(exc).__name__}: {one_line(exc)} (reasonvqa --debug ... shows the traceback)",
                       err=True)
            raise typer.Exit(DATA_EXIT) from None


def _click_error(exc: typer.TyperException) -> None:
    """A usage error of click or Typer as one ``error:`` line (its exit status: 2 for usage); the help a
    command without arguments shows stays as it is."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    typer.echo(f"error: {one_line(exc.format_message())}", err=True)
    raise typer.Exit(exc.exit_code)


app = typer.Typer(help="Build knowledge-based VQA datasets (ReasonVQA style) as Prefect flows.",
                  no_args_is_help=True, add_completion=False, cls=OneLineErrors, pretty_exceptions_enable=False)
sources_app = typer.Typer(help="Read source datasets.", no_args_is_help=True)
link_app = typer.Typer(help="Link objects to Wikidata.", no_args_is_help=True)
app.add_typer(sources_app, name="sources")
app.add_typer(link_app, name="link")


@app.callback()
def main(debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks instead of one-line errors.")] = False) -> None:
    """Build knowledge-based VQA datasets (ReasonVQA style) as Prefect flows."""


def _quiet_prefect() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # a failing task logs its traceback at ERROR: without --debug the command's one-line error says it all
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING" if _debug() else "CRITICAL")
    # the temporary API server a flow starts when none is configured needs >20 s on a busy 2-core machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _debug() -> bool:
    """True when the command line began with ``reasonvqa --debug``."""
    from typer.main import get_current_context

    ctx = get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("debug"))


def _split_list(value: Optional[str]) -> Optional[list[str]]:
    """The comma-separated items of a flag; None when the flag was not given."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:  # "--domains ," must not mean "no filter"
        raise UsageError(f"{value!r} names nothing; give comma-separated values or leave the option out")
    return items


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
    if not any(names):  # "--domains ," or "" must not mean "no filter"
        raise UsageError(f"--domains {value!r} names no domain; give comma-separated names or leave the option out")
    for name in filter(None, names):
        try:
            out += resolve_domain_names([name])
        except ValueError:
            out.append(name)
    return out


KINDS_HELP = "Comma-separated question kinds to keep: template, verified, grounded, grounded_vlm."
TASK_TYPES_HELP = ("Comma-separated task types to keep: knowledge, free_form, identification, attribute, ocr, "
                   "spatial, counting, comparison.")
HALLUCINATION_HELP = "only: keep hallucination questions only; exclude: drop them."
ABSENCE_BASIS_HELP = ("Comma-separated bases of absence claims the release takes (strongest first: taxonomy, review, "
                      "annotated_attribute, refuting_boxes, annotated_relation, detector, vlm, cooccurrence); hallucination "
                      "questions with another basis, or none, are set aside in pool/ (default: every basis).")


@app.command()
def build(
    sample: Annotated[bool, typer.Option("--sample", help="Build from the bundled sample data.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", exists=True, dir_okay=False,
                                                   help="BuildConfig YAML file.")] = None,
    out: Annotated[str, typer.Option(help="Output folder or fsspec URL (s3://, gs://, ...); the release goes to "
                                          "OUT/<name>/<version>/.")] = "out",
    domains: Annotated[Optional[str], typer.Option(
        help='Comma-separated domains (names or slugs, any case), e.g. "Places & Locations,food".')] = None,
    work: Annotated[Optional[str], typer.Option(help="Work folder: a local path, a mount every Dask worker sees, or an fsspec URL (s3://...) "
                                                     "(default OUT/.work/<hash of config, inputs and code>).")] = None,
    version: Annotated[Optional[str], typer.Option(help="Release version (overrides the config).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing release version.")] = False,
    dask_workers: Annotated[int, typer.Option(help="Run shards on a local Dask cluster of N processes.")] = 0,
    dask_address: Annotated[Optional[str], typer.Option(help="Run shards on an existing Dask scheduler.")] = None,
    kinds: Annotated[Optional[str], typer.Option(help=KINDS_HELP)] = None,
    task_types: Annotated[Optional[str], typer.Option(help=TASK_TYPES_HELP)] = None,
    hallucination: Annotated[Optional[str], typer.Option(help=HALLUCINATION_HELP)] = None,
    absence_basis: Annotated[Optional[str], typer.Option(help=ABSENCE_BASIS_HELP)] = None,
    embed_images: Annotated[Optional[str], typer.Option(
        help="auto: embed the bytes of local images whose source license allows it; never: URLs and paths only "
             "(overrides release.embed_images).")] = None,
    knowledge_from: Annotated[Optional[Path], typer.Option(
        "--knowledge-from", exists=True, file_okay=False,
        help="A release folder: answer every knowledge query from the knowledge it carries (offline: no endpoint, "
             "no mirror). Without --sample or --config the release's own config is used: the same release, "
             "byte for byte.")] = None,
) -> None:
    """Run the build-reasonvqa flow and print the release folder."""
    from reasonvqa.flows.config import sample_config

    from reasonvqa import storage

    if sample and config is not None or not sample and config is None and knowledge_from is None:
        raise typer.BadParameter("give exactly one of --sample or --config FILE (or --knowledge-from RELEASE alone)")
    recorded = _release_knowledge_or_exit(knowledge_from) if knowledge_from is not None else None
    if storage.protocol(out):
        storage.filesystem(out)  # a MissingBackend (exit 2) names the extra to install
    else:
        _check_out_folder(Path(out))
    work_dir = storage.work_folder(work) if work is not None else None  # a URL: its mirror; a bad one exits 2
    if sample:
        cfg = sample_config()
    elif config is not None:
        cfg = _load_config_or_exit(config)
    else:
        assert knowledge_from is not None and recorded is not None  # --knowledge-from alone (checked above)
        cfg = _release_config_or_exit(knowledge_from, recorded.config)
    if domains is not None:
        cfg.questions.domains = _domain_list(domains, strict=True)
    if version is not None:
        cfg.release.version = _checked_version(version)
    if embed_images is not None:
        if embed_images not in ("auto", "never"):
            raise typer.BadParameter(f"--embed-images is auto or never, got {embed_images!r}")
        cfg.release.embed_images = embed_images
    if kinds is not None or task_types is not None or hallucination is not None:
        cfg.select = _kind_selection(kinds, task_types, hallucination)
    if absence_basis is not None:
        cfg.balance = cfg.balance.model_validate({**cfg.balance.model_dump(), "absence_bases": _absence_bases(absence_basis)})
    if not storage.protocol(out):
        from reasonvqa.tasks.release.paths import default_work_folder, release_dir

        release_dir(Path(out), cfg.release.name, cfg.release.version)  # lengths and containment, before any work
        if work is None:  # a symlinked OUT/.work would take the build outside --out
            default_work_folder(Path(out), Path(out) / ".work")
        _tell_busy_work_folders(Path(out), None if work is None or storage.protocol(work) else work_dir)
    _quiet_prefect()
    from reasonvqa.flows.build_inputs import check_build_inputs
    from reasonvqa.flows.build_reasonvqa import build_reasonvqa
    from reasonvqa.flows.runners import make_task_runner

    try:  # fail in a line, before Prefect starts, rather than in a task's traceback after minutes of work
        check_build_inputs(cfg, needs_mirror=recorded is None)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    from reasonvqa.errors import ReleaseExistsError
    from reasonvqa.prefect_api import local_prefect_api
    from reasonvqa.tasks.release.writer import EmptySplitError

    from reasonvqa import progress

    runner = make_task_runner(dask_workers, dask_address)
    try:
        with local_prefect_api(), progress.bars(not _debug()):  # a local API unless one is configured
            # the flow returns a State; calling it returns that state's result, the release folder
            release = cast(str, build_reasonvqa.with_options(task_runner=runner)(
                cfg, out, (work if storage.protocol(work) else str(work_dir)) if work is not None else None, overwrite,
                knowledge_from=str(knowledge_from) if knowledge_from is not None else None))
    except (FileNotFoundError, ReleaseExistsError, EmptySplitError) as exc:  # missing input, version taken, no questions
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    if not storage.protocol(out):
        _print_summary(Path(release), work_dir or Path(out) / ".work")
    typer.echo(release)


def _release_knowledge_or_exit(release: Path):
    """The knowledge a release carries (``SourceKnowledge``); exit 2 naming why a release cannot be rebuilt from."""
    from reasonvqa.tasks.release.knowledge_source import ReleaseKnowledgeError, open_release_knowledge

    try:
        return open_release_knowledge(release)
    except ReleaseKnowledgeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)


def _release_config_or_exit(release: Path, config: dict):
    """The BuildConfig a release was built with (its manifest's ``config``); exit 2 when it no longer validates."""
    from pydantic import ValidationError

    from reasonvqa.flows.config import BuildConfig

    try:
        return BuildConfig.model_validate(config)
    except ValidationError as exc:
        first = exc.errors()[0]
        typer.echo(f"error: {release}/manifest.json: config does not validate here "
                   f"({'.'.join(map(str, first['loc']))}: {first['msg']}); give --config FILE", err=True)
        raise typer.Exit(2)


def _tell_busy_work_folders(out: Path, work: Optional[Path]) -> None:
    """Within a second of the command, before Prefect starts: the work folders another build holds now
    (this build waits there if it needs the same one; the flow says so again when it does)."""
    from reasonvqa.locks import held_by

    candidates = [work / ".lock"] if work is not None else sorted((out / ".work").glob("*/.lock"))
    for lock in candidates:
        holder = held_by(lock)
        if holder is not None:
            typer.echo(f"warning: build work folder {lock.parent} is in use by {holder}; a build that needs it "
                       "waits for it to finish", err=True)


def _kind_selection(kinds: Optional[str], task_types: Optional[str], hallucination: Optional[str]):
    """The --kinds / --task-types / --hallucination flags as a KindSelection (bad values exit 2)."""
    from reasonvqa.tasks.balance.kind_filters import Hallucination, KindSelection

    if hallucination not in (None, "only", "exclude"):
        raise typer.BadParameter("is one of only, exclude", param_hint="--hallucination")
    return KindSelection(kinds=_split_list(kinds), task_types=_split_list(task_types),
                         hallucination=cast("Hallucination | None", hallucination))  # checked above


def _absence_bases(text: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The --absence-basis list (bad values exit 2); ``extra`` names further accepted words (export's "none")."""
    from reasonvqa.absence_bases import BASES

    names = _split_list(text) or []
    unknown = sorted(set(names) - set(BASES) - set(extra))
    if unknown or not names:
        what = f"unknown basis {unknown}" if unknown else f"{text!r} names no basis"
        raise typer.BadParameter(f"{what}; one or more of {', '.join(BASES + extra)}", param_hint="--absence-basis")
    return sorted(set(names))


def _print_summary(release: Path, work: Path) -> None:
    """The one-screen summary on stderr (stdout keeps only the release path, for scripts)."""
    from reasonvqa import progress
    from reasonvqa.flows.run_report import latest_run_report
    from reasonvqa.work_files import drop_local_copies

    try:
        progress.console.print(progress.build_summary(release, latest_run_report(work)))
    finally:
        drop_local_copies(work)  # a work folder URL: the copy of its report fetched here; nothing for a local folder


def _check_out_folder(out: Path) -> None:
    from reasonvqa.tasks.release.paths import check_output_folder

    check_output_folder(out)  # a UsageError: one line, exit 2


def _checked_version(version: str) -> str:
    from reasonvqa.tasks.release.paths import check_release_version

    return check_release_version(version)  # a UsageError: one line, exit 2


def _load_config_or_exit(path: Path):
    """The BuildConfig in ``path``, or exit 2 with one error naming the file (no traceback)."""
    import yaml
    from pydantic import ValidationError

    from reasonvqa.flows.config import load_config

    try:
        return load_config(path)
    except yaml.YAMLError as exc:
        typer.echo(f"error: {path}: invalid YAML: {one_line(exc)}", err=True)
    except UnicodeDecodeError as exc:
        typer.echo(f"error: {path}: not UTF-8 text (byte {exc.start}: {exc.reason})", err=True)
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
    kinds: Annotated[Optional[str], typer.Option(help=KINDS_HELP)] = None,
    task_types: Annotated[Optional[str], typer.Option(help=TASK_TYPES_HELP)] = None,
    hallucination: Annotated[Optional[str], typer.Option(help=HALLUCINATION_HELP)] = None,
    decisions: Annotated[Optional[Path], typer.Option(
        help="Annotation decision store to apply (reasonvqa import writes it).", file_okay=False)] = None,
    absence_basis: Annotated[Optional[str], typer.Option(help=ABSENCE_BASIS_HELP.replace("every basis", "the source's"))] = None,
    allow_empty: Annotated[bool, typer.Option(
        "--allow-empty", help="Publish even when the train or test split is empty (recorded in the manifest; "
                              "datasets.load_dataset cannot load an empty split).")] = False,
) -> None:
    """Filter, re-balance and re-split a release without touching the network."""
    from reasonvqa.flows.resplit import SourceReleaseError, resplit as run_resplit
    from reasonvqa.tasks.balance.filters import DomainMatch, EmptySelectionError
    from reasonvqa.tasks.release.writer import EmptySplitError

    if domain_match not in ("route", "any", "all"):
        raise typer.BadParameter("--domain-match is one of route, any, all")
    hop_list = _hop_list(hops)
    _check_out_folder(out)
    if version is not None:
        from reasonvqa.tasks.release.paths import check_version_length

        check_version_length(out, _checked_version(version))  # before the source is read (its name: after)
    try:
        path = run_resplit(source, out, domains=_domain_list(domains, strict=False), sources=_split_list(sources),
                           hops=hop_list, version=version, seed=seed, domain_match=cast(DomainMatch, domain_match),
                           kinds=_kind_selection(kinds, task_types, hallucination), decisions=decisions,
                           absence_bases=_absence_bases(absence_basis) if absence_basis is not None else None,
                           allow_empty=allow_empty)
    except (EmptySelectionError, SourceReleaseError, EmptySplitError) as exc:
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
    name: Annotated[str, typer.Option(help="Deployment name: registers 'build-reasonvqa/<name>' and "
                                           "'resplit/<name>'.")],
    sample: Annotated[bool, typer.Option("--sample", metavar="", help="Default build parameters: the bundled "
                                                                      "sample (give it or --config, not both).")] = False,
    config: Annotated[Optional[Path], typer.Option(
        "--config", exists=True, dir_okay=False, metavar="FILE",
        help="Default build parameters: a BuildConfig YAML file (give it or --sample, not both).")] = None,
    out: Annotated[Path, typer.Option(help="Default output folder of the build deployment.")] = Path("out"),
    cron: Annotated[Optional[str], typer.Option(
        help='Rebuild schedule of build-reasonvqa/<name>, a cron expression read in --timezone, e.g. "0 3 * * 1" '
             "(Mondays 03:00). Default: no schedule, runs only when triggered.")] = None,
    timezone: Annotated[str, typer.Option(help="IANA time zone of --cron, e.g. Europe/Paris.")] = "UTC",
    replace: Annotated[bool, typer.Option(
        "--replace", metavar="", help="Delete deployments of the same names that `prefect deploy` made (prefect.yaml, run by a "
                          "work pool) and serve these in their place; without it serve refuses them.")] = False,
) -> None:
    """Serve build-reasonvqa and resplit as deployments '<flow>/<name>' (blocks; needs a Prefect API).

    Exactly one of --sample and --config gives the build's defaults; --cron runs in --timezone (UTC).
    """
    from reasonvqa.flows.config import sample_config

    if sample == (config is not None):
        raise typer.BadParameter("give exactly one of --sample or --config FILE (they are mutually exclusive)")
    cfg = _load_config_or_exit(config) if config is not None else sample_config()  # exactly one (checked above)
    _quiet_prefect()
    from reasonvqa.flows.deployments import serve_build

    serve_build(name, cfg, str(out.resolve()), cron, timezone, replace)


@app.command("export")
def export_annotations_command(
    format: Annotated[str, typer.Option("--format", help="labelstudio, cvat or coco.")],
    source: Annotated[str, typer.Option("--source", help="A release folder or a stage output folder: a path or an "
                                                         "fsspec URL (a build's work folder on s3://).")],
    size: Annotated[int, typer.Option("--size", min=1, help="Number of items in the batch.")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the batch files.")],
    store: Annotated[Path, typer.Option("--store", help="Decision store (batches and decisions).")] = Path("annotations"),
    seed: Annotated[int, typer.Option(help="Seed of the stratified choice.")] = 0,
    batch_id: Annotated[Optional[str], typer.Option(help="Batch id (default: a hash of the chosen items).")] = None,
    sources: Annotated[Optional[str], typer.Option(help="Comma-separated image sources, e.g. sa1b,vg.")] = None,
    domains: Annotated[Optional[str], typer.Option(help="Comma-separated question or visual domains.")] = None,
    task_types: Annotated[Optional[str], typer.Option(help="Comma-separated question task types.")] = None,
    kinds: Annotated[Optional[str], typer.Option(help=KINDS_HELP)] = None,
    hops: Annotated[Optional[str], typer.Option(help="Comma-separated hop counts.")] = None,
    hallucination: Annotated[Optional[bool], typer.Option("--hallucination/--no-hallucination",
                                                          help="Only items with / without the hallucination flag.")] = None,
    absence_basis: Annotated[Optional[str], typer.Option(
        help="Only hallucination questions with one of these absence bases (comma-separated; none: without a "
             "basis, the ones a release sets aside until a review confirms them).")] = None,
    include_decided: Annotated[bool, typer.Option(help="Also send items that already have a decision.")] = False,
    url_prefix: Annotated[Optional[str], typer.Option(help="Label Studio image URL prefix for local files.")] = None,
) -> None:
    """Choose a stratified batch and write it for Label Studio, CVAT or COCO; print a JSON summary."""
    from reasonvqa.annotation_exports.batches import BatchFilters
    from reasonvqa.annotation_exports.roundtrip import EXPORT_FORMATS, export_batch

    if format not in EXPORT_FORMATS:
        raise typer.BadParameter(f"one of {', '.join(EXPORT_FORMATS)}", param_hint="--format")
    _check_out_folder(out)
    filters = BatchFilters(sources=_split_list(sources), domains=_split_list(domains), task_types=_split_list(task_types),
                           kinds=_split_list(kinds), hops=_hop_list(hops), hallucination=hallucination,
                           undecided=not include_decided,
                           absence_basis=_absence_bases(absence_basis, ("none",)) if absence_basis is not None else None)
    result = export_batch(source, out, format, size, store=store, seed=seed, filters=filters, batch_id=batch_id,
                          url_prefix=url_prefix)
    typer.echo(json.dumps(result.summary(), indent=2, sort_keys=True))


@app.command("import")
def import_annotations_command(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Label Studio JSON export or CVAT 1.1 XML.")],
    format: Annotated[str, typer.Option("--format", help="labelstudio or cvat.")],
    store: Annotated[Path, typer.Option("--store", help="Decision store the batch was exported with.")] = Path("annotations"),
    batch_id: Annotated[Optional[str], typer.Option(help="CVAT: the batch, when the file does not name it.")] = None,
    annotator: Annotated[Optional[str], typer.Option(help="CVAT: annotator (default: the task owner).")] = None,
    time: Annotated[Optional[str], typer.Option(help="CVAT: annotation time, ISO 8601 (default: the dump time).")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Import nothing when any record is rejected.")] = False,
) -> None:
    """Commit a file's good decisions to the store in one step; print each rejected record (file#task-id:
    reason) on stderr and the import report's summary."""
    from reasonvqa.annotation_exports.importing import reject_lines
    from reasonvqa.annotation_exports.roundtrip import IMPORT_FORMATS, import_decisions

    if format not in IMPORT_FORMATS:
        raise typer.BadParameter(f"one of {', '.join(IMPORT_FORMATS)}", param_hint="--format")
    report = import_decisions(file, format, store=store, batch_id=batch_id, annotator=annotator, time=time,
                              strict=strict)
    for line in reject_lines(report):
        typer.echo(f"rejected: {line}", err=True)
    typer.echo(json.dumps(report.summary(), indent=2, sort_keys=True))


class _NamesSourceKinds(TyperCommand):
    """A command whose ``--source`` help lists the source kinds registered when the help is shown."""

    def format_help(self, ctx, formatter) -> None:
        from reasonvqa.sources import kinds

        for param in self.params:
            if param.name == "source" and isinstance(param, TyperOption):
                param.help = f"Source kind, one of: {', '.join(kinds())}."
        super().format_help(ctx, formatter)


@sources_app.command("scan", cls=_NamesSourceKinds)
def sources_scan(
    source: Annotated[str, typer.Option("--source", help="Source kind.")],
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


@app.command("build-verified-qa")
def build_verified_qa_command(
    config: Annotated[Path, typer.Option("--config", exists=True, dir_okay=False, help="YAML: graphs, verified (llm, sandbox, filters), shard_size.")],
    out: Annotated[Path, typer.Option(help="Output folder: questions.parquet, rejects.parquet, stats.json.")] = Path("out/verified"),
    work: Annotated[Optional[str], typer.Option(help="Work folder, a local path (default OUT/.work).")] = None,
) -> None:
    """Generate verified free-form questions (PROVE) from scene graphs with an OpenAI-compatible LLM."""
    import yaml
    from pydantic import ValidationError

    from reasonvqa.storage import local_work_folder
    from reasonvqa.yaml_files import load_yaml

    work_dir = local_work_folder(work) if work is not None else None  # a URL: exit 2, saying why
    _check_out_folder(out)

    from reasonvqa.flows.build_verified_qa import VerifiedBuildConfig, build_verified_qa

    try:
        cfg = VerifiedBuildConfig.model_validate(load_yaml(config.read_text(encoding="utf-8")) or {})
    except (yaml.YAMLError, ValidationError) as exc:
        typer.echo(f"error: {config}: {exc}", err=True)
        raise typer.Exit(2)
    if not cfg.graphs.path.is_absolute():
        cfg.graphs.path = (config.parent / cfg.graphs.path).resolve()
    _quiet_prefect()
    from reasonvqa.llm import LLMEndpointError
    from reasonvqa.tasks.verify.sandbox import SandboxUnavailable

    try:
        typer.echo(build_verified_qa(cfg, str(out), str(work_dir) if work_dir else None))
    except (LLMEndpointError, SandboxUnavailable) as exc:  # finished calls stay cached for the rerun
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1)


images_app = typer.Typer(help="Images of a release.", no_args_is_help=True)
app.add_typer(images_app, name="images")


@images_app.command("fetch")
def images_fetch(
    release: Annotated[Path, typer.Argument(help="A release folder (with an images/ table).")],
    dest: Annotated[Path, typer.Option(help="Folder for the files, the ledger and images/part-00000.parquet.")],
    workers: Annotated[int, typer.Option(min=1, max=64, help="Downloads at once.")] = 8,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds per download.")] = 30.0,
    batch: Annotated[int, typer.Option(min=1, help="Images held in memory at once (one row group of the table).")] = 500,
) -> None:
    """Download a release's images by URL (resuming, checked), embedded in a `datasets` Image table."""
    from reasonvqa.progress import bars, stage
    from reasonvqa.tasks.release.images import count_release_images, fetch_images

    with bars(), stage("images", count_release_images(release)) as advance:
        report = fetch_images(release, dest, workers=workers, timeout_s=timeout, batch=batch, on_progress=advance)
    for image_id, reason in sorted(report.failed.items()):
        typer.echo(f"FAIL {image_id}: {reason}", err=True)
    typer.echo(f"{report.table}: {report.fetched} fetched, {report.embedded} from the release, {report.reused} reused, "
               f"{len(report.failed)} failed ({report.bytes / 1e6:.1f} MB in {report.seconds:.1f} s)")
    if report.failed:
        raise typer.Exit(1)


# --- verified free-form QA (PROVE): the program sandbox ---------------------------------------
sandbox_app = typer.Typer(help="Run LLM-written verification programs in the sandbox.", no_args_is_help=True)
app.add_typer(sandbox_app, name="sandbox")


GRAPH_MAX_BYTES = 64 << 20  # one image's scene graph is kilobytes


@sandbox_app.command("run")
def sandbox_run(
    program: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A program with def verify(sg) or def execute_command(scene_graph).")],
    graph: Annotated[Path, typer.Option("--graph", exists=True, dir_okay=False, help="Scene graph JSON (caption tuple form).")],
) -> None:
    """Print one JSON object {status, output, reason}; exit 0 for every status (the status is the result)."""
    from reasonvqa.jsonstream import JsonSourceError, read_json_document
    from reasonvqa.tasks.verify.sandbox import run_one
    from reasonvqa.tasks.verify.scene_graph import SceneGraph

    try:  # size and nesting checked before parsing: a 100,000-deep graph is one line, not a RecursionError
        graph_json = SceneGraph.from_json(read_json_document(graph, max_bytes=GRAPH_MAX_BYTES)).to_json()
    except JsonSourceError as exc:
        typer.echo(f"error: {one_line(exc)}", err=True)
        raise typer.Exit(2)
    except ValueError as exc:
        typer.echo(f"error: {graph}: {one_line(exc)}", err=True)
        raise typer.Exit(2)
    result = run_one(program.read_text(encoding="utf-8", errors="replace"), graph_json)
    typer.echo(json.dumps(result, sort_keys=True))


@sandbox_app.command("status")
def sandbox_status() -> None:
    """Print which sandbox layers are on here (seccomp, bwrap, rlimits, AST allow-list)."""
    from reasonvqa.tasks.verify.sandbox import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(workers=1)) as sandbox:
        typer.echo(json.dumps(sandbox.protections(), sort_keys=True))


# --- scoring predictions on a release (docs/evaluation.md) --------------------------------------
@app.command("evaluate")
def evaluate_command(
    release: Annotated[Path, typer.Argument(help="A release folder (with manifest.json).")],
    predictions: Annotated[Optional[Path], typer.Argument(help="Predictions, one JSON object per line "
                                                                "(docs/evaluation.md).")] = None,
    split: Annotated[str, typer.Option(help="The split scored.")] = "test",
    baseline: Annotated[Optional[str], typer.Option(
        help="Score a blind baseline instead of a file: text-only, choices-only, prior, or all (comma-separated).")] = None,
    judge: Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint URL of the LLM judge (Grove's S_a, "
                                                      "PROVE's hscore/tscore); without it, exact match only.")] = None,
    judge_model: Annotated[str, typer.Option(help="The judge's model name.")] = "gpt-4o",
    out: Annotated[Optional[Path], typer.Option(help="Write the JSON report here (with several baselines: a "
                                                     "folder, one <baseline>.json each).")] = None,
    predictions_out: Annotated[Path, typer.Option(help="Folder for the baselines' predictions files (and the "
                                                       "judge's call cache).")] = Path("out/evaluate"),
    card: Annotated[Optional[Path], typer.Option(help="With --baseline: write evaluation.json and the card section "
                                                      "evaluation.md into this folder.")] = None,
) -> None:
    """Score predictions (or a blind baseline) on a release with each kind's paper metric; print the table."""
    from reasonvqa.tasks.evaluate.baselines import BASELINES, baseline_predictions, write_predictions
    from reasonvqa.tasks.evaluate.card import write_card_figures
    from reasonvqa.tasks.evaluate.report import print_report, write_report
    from reasonvqa.tasks.evaluate.scoring import evaluate

    if (predictions is None) == (baseline is None):
        raise UsageError("give a PREDICTIONS file or --baseline, not both or neither")
    if card is not None and baseline is None:
        raise UsageError("--card writes the blind baselines' figures: give --baseline too")
    llm_judge = None
    if judge is not None:
        from reasonvqa.call_cache import CallCache
        from reasonvqa.llm import LLMClient, LLMConfig
        from reasonvqa.tasks.evaluate.scoring import Judge

        # every judge and extraction request is cached beside the predictions: a rerun sends none
        llm_judge = Judge(LLMClient(LLMConfig(base_url=judge, model=judge_model)),
                          CallCache(predictions_out / "judge-calls.jsonl"))
    names = list(BASELINES) if baseline == "all" else (_split_list(baseline) or [])
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise UsageError(f"--baseline: unknown {', '.join(unknown)}; one of {', '.join(BASELINES)} or all")
    runs = {name: write_predictions(baseline_predictions(release, name, split),
                                    predictions_out / f"{release.parent.name}-{release.name}-{name}-{split}.jsonl")
            for name in names} if names else {"predictions": cast(Path, predictions)}
    reports = {}
    try:
        for name, path in runs.items():
            reports[name] = evaluate(release, path, split, judge=llm_judge)
    finally:
        if llm_judge is not None and llm_judge.cache is not None:
            llm_judge.cache.close()
    for name, report in reports.items():
        print_report(report)
        if out is not None:
            target = out / f"{name}.json" if len(runs) > 1 else out
            write_report(report, target)
            typer.echo(f"report: {target}")
    if card is not None:
        for path in write_card_figures(reports, split, card):
            typer.echo(f"card figures: {path}")


if __name__ == "__main__":
    app()
