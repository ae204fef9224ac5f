"""Re-split a release: filter its pre-balancing pool, re-balance, re-split, write a new version.

Offline by construction: it reads only the source release folder (manifest + pool/ Parquet,
whose checksums are checked against the manifest) and writes ``<out>/<name>/<version>/``.
``resplit`` is the plain function (CLI: ``reasonvqa resplit``); ``resplit_flow`` is the
Prefect flow ``resplit`` around it, which also publishes the release's stats as artifacts.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.states import State

from reasonvqa.annotation_exports.apply import DECISIONS_FILE, apply_store, write_decisions_file
from reasonvqa.flows.outcome import reported
from reasonvqa.image_groups import groups_of
from reasonvqa.schemas import MANIFEST
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.filters import FILTER_COLUMNS, DomainMatch, filter_rows, narrow_selected
from reasonvqa.tasks.balance.kind_filters import KindSelection, select_kinds
from reasonvqa.tasks.balance.pipeline import plan_release
from reasonvqa.tasks.balance.stats import write_stats
from reasonvqa.tasks.release.breakdown import released_questions, write_breakdown
from reasonvqa.tasks.release.embed import embedded_lookup
from reasonvqa.tasks.release.paths import release_dir
from reasonvqa.tasks.release.reader import record_tables
from reasonvqa.tasks.release.reader import read_columns, read_rows
from reasonvqa.tasks.release.writer import require_nonempty_splits, sha256_file, write_release


class SourceReleaseError(ValueError):
    """The source folder is not a usable release (no manifest, pool missing or altered)."""


def resplit(
    source: Path,
    out: Path,
    *,
    domains: list[str] | None = None,
    sources: list[str] | None = None,
    hops: list[int] | None = None,
    version: str | None = None,
    seed: int | None = None,
    domain_match: DomainMatch = "route",
    overwrite: bool = False,
    kinds: KindSelection | None = None,
    decisions: Path | None = None,
    absence_bases: list[str] | None = None,
    allow_empty: bool = False,
) -> Path:
    """Write a new release version from ``source``'s pool filtered by domains / sources / hops
    and by question kind, task type and hallucination flag (``kinds``).

    ``absence_bases``: the bases of absence claims the new release takes (``balance.absence_bases``; default
    the source's); hallucination rows without one are set aside by balancing, kept in the pool.

    ``decisions``: an annotation decision store (annotation_exports) whose decisions the new
    release applies to the pool and the record tables before balancing, listed in its manifest.

    Balancing and split settings come from the source manifest's config; ``seed`` defaults to
    the source's. The default version is ``<source version>-resplit-<8 hex>``, the hex being a
    hash of the filters, seed and source pool, so the same request gives the same version.
    Raises EmptySelectionError when the filters leave no question, SourceReleaseError when the
    source pool is missing or does not match its manifest, EmptySplitError when the train or test
    split would be empty, unless ``allow_empty`` (then recorded in the manifest's
    ``config.resplit.allow_empty``, which ``verify`` reads).
    """
    source = Path(source)
    manifest = _verified_manifest(source)  # its name and version become a path: trust them only after verify
    pool_id = pool_fingerprint(source, manifest)
    config = manifest.get("config", {})
    balance_dump = dict(config.get("balance", {}))
    if absence_bases is not None:
        balance_dump["absence_bases"] = sorted(set(absence_bases))
    balance_config = BalanceConfig.model_validate(balance_dump)
    split_config = SplitConfig.model_validate(config.get("split", {}))
    seed = int(config.get("seed", 0)) if seed is None else seed

    # the filters' columns first, then only the selected rows, one pool file at a time
    filtered_by = read_columns(source, "pool", [*FILTER_COLUMNS, "template_version"])
    property_domains, bank_warning = (_property_domains(filtered_by) if domains is not None and domain_match == "route"
                                      else (None, None))
    keep, filter_report = filter_rows(filtered_by, domains=domains, sources=sources, hops=hops, domain_match=domain_match,
                                      property_domains=property_domains)
    del filtered_by
    if bank_warning:
        filter_report["warnings"] = [bank_warning]
    selected = narrow_selected(read_rows(source, "pool", keep), domains, domain_match)
    del keep
    selected, kind_report = select_kinds(selected, kinds or KindSelection())
    filter_report["filters"].update(kind_report["filters"])
    filter_report["questions_out"] = selected.num_rows
    filter_report["dropped_by"].update(kind_report["dropped_by"])
    if absence_bases is not None:  # applied by balancing (after the decisions, which may give a basis)
        filter_report["filters"]["absence_bases"] = balance_config.absence_bases
    selected, tables, applied = apply_store(decisions, selected, record_tables(source, manifest))
    if applied is not None and applied.set_aside:  # questions the review left without consistent evidence/choices
        filter_report["set_aside_by_review"] = applied.set_aside
    request = {"filters": filter_report["filters"], "seed": seed, "source_pool": pool_id}
    if applied is not None:
        request["annotations"] = applied.store_fingerprint
    request_id = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
    version = version or f"{manifest['version']}-resplit-{request_id[:8]}"
    release_dir(Path(out), manifest["name"], version)  # a name the file system refuses fails now, not after the work

    tables = tables_of_pool(tables, selected)  # the pool keeps every selected row (removed ones too)
    done = plan_release(selected, balance_config, split_config, seed, groups_of(tables.get("images")))  # views: no copy
    del selected
    pool, balanced, split = done.pool, done.balance, done.split
    if not allow_empty:  # `datasets` cannot load an empty split; a build refuses one too
        require_nonempty_splits(manifest["name"], version, {"train": split.train, "test": split.test}, pool.num_rows,
                                "; choose more questions, or publish it anyway with --allow-empty")
    new_config = {
        **{k: v for k, v in config.items() if k != "resplit"},
        "seed": seed,
        "resplit": {
            "from": {"name": manifest["name"], "version": manifest["version"], "config_hash": manifest.get("config_hash")},
            "filters": filter_report["filters"],
            "seed": seed,
            **({"allow_empty": True} if allow_empty else {}),
        },
    }
    if absence_bases is not None:
        new_config["balance"] = balance_config.model_dump(mode="json")
    new_config.setdefault("release", {})
    new_config["release"] = {**new_config["release"], "version": version}
    inputs = {**manifest.get("inputs", {}), "resplit_source_pool": pool_id}
    with tempfile.TemporaryDirectory(prefix="resplit-stats-") as tmp:
        stats_dir = Path(tmp) / "stats"
        files = write_stats(pool, balanced, split, stats_dir)
        files.update(write_breakdown(released_questions(split.train, split.test), tables.get("regions"), stats_dir,
                                     embedded_lookup(tables.get("images"))))
        _write_json(filter_report, stats_dir / "filter_report.json")
        files["filter_report.json"] = stats_dir / "filter_report.json"
        if applied is not None:
            files[DECISIONS_FILE] = write_decisions_file(applied, stats_dir)
        return write_release(
            Path(out),
            manifest["name"],
            version,
            {"train": split.train, "test": split.test},
            pool=pool,
            stats_dir=stats_dir,
            config=new_config,
            config_hash=hashlib.sha256(json.dumps(new_config, sort_keys=True, separators=(",", ":")).encode()).hexdigest(),
            inputs=inputs,
            card_notes=_card_notes(manifest, filter_report, balanced.report, split.report),
            stats_files={name: f"stats/{name}" for name in sorted(files)},
            overwrite=overwrite,
            tables=tables or None,
            annotations=applied.manifest_entry() if applied is not None else None,
            verify_first=True,  # a re-split that fails verify is never published
        )


def tables_of_pool(tables: dict, pool: pa.Table) -> dict:
    """The source release's record tables (regions, images, entity links), restricted to the images of the new
    pool; tables of no image (the knowledge and its recorded answers) are carried over whole, so the re-split
    can be rebuilt from (``build --knowledge-from``) as its source can."""
    images = pc.unique(pool["image_id"])
    return {name: table.restricted(images) if hasattr(table, "restricted")
            else table.filter(pc.is_in(table["image_id"], images)) if "image_id" in table.column_names else table
            for name, table in tables.items()}


def _property_domains(pool) -> tuple[dict[str, tuple[str, ...]], str | None]:
    """The template bank's property -> domains map, and a warning if the pool was built with another bank."""
    from reasonvqa.tasks.questions.bank import load_bank

    bank = load_bank()
    used = set(pool["template_version"].unique().to_pylist()) - {None}
    warning = None
    if used and used != {bank.version}:
        warning = (f"the pool was generated with template bank {sorted(used)}, the domains of its properties "
                   f"are taken from the current bank {bank.version}")
    return {pid: t.domains for pid, t in bank.properties.items()}, warning


def pool_fingerprint(source: Path, manifest: dict) -> str:
    """Content address of the source's pool: sha256 over its files' manifest checksums.

    Each pool file is re-hashed and compared with the manifest first, so a changed pool is
    refused instead of silently re-split.
    """
    entries = sorted((rel, meta) for rel, meta in manifest.get("files", {}).items() if rel.startswith("pool/"))
    if not entries:
        raise SourceReleaseError(f"{source}: the manifest lists no pool/ files; this release cannot be re-split")
    digest = hashlib.sha256()
    for rel, meta in entries:
        path = source / rel
        if not path.is_file():
            raise SourceReleaseError(f"{path}: pool file listed in the manifest is missing")
        if sha256_file(path) != meta.get("sha256"):
            raise SourceReleaseError(f"{path}: pool file does not match the manifest checksum")
        digest.update(f"{rel}\0{meta['sha256']}\n".encode())
    return "sha256:" + digest.hexdigest()


def _verified_manifest(source: Path) -> dict:
    """The manifest of ``source`` once ``verify_release`` finds no problem; else SourceReleaseError."""
    from reasonvqa.tasks.release.verify import verify_release

    path = source / MANIFEST
    if not path.is_file():
        raise SourceReleaseError(f"{path}: not a release folder (no manifest)")
    problems = verify_release(source)
    if problems:
        raise SourceReleaseError(f"{source}: fails verification ({len(problems)} problem(s), first: {problems[0]}); "
                                 "see reasonvqa verify")
    return json.loads(path.read_text(encoding="utf-8"))


def _write_json(obj: dict, path: Path) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _card_notes(manifest: dict, selection: dict, balance: dict, split: dict) -> str:
    lines = [
        f"Re-split of {manifest['name']} {manifest['version']} with filters "
        f"{json.dumps(selection['filters'], sort_keys=True)}: {selection['questions_out']} of "
        f"{selection['questions_in']} pool questions selected, {balance['questions_kept']} kept by balancing "
        f"({balance['rounds_run']} round(s)), {split['train']['questions']} train / {split['test']['questions']} test.",
    ]
    lines += [f"Warning: {w}" for w in balance["warnings"] + split["warnings"]]
    lines += [f"Warning: {w}" for w in selection.get("warnings", [])]
    aside = selection.get("set_aside_by_review", [])
    if aside:
        reasons = sorted({a["reason"] for a in aside})
        lines.append(f"Review: {len(aside)} question(s) set aside, their corrections inconsistent with their evidence "
                     f"or choices ({', '.join(reasons)}); listed in stats/annotation_decisions.json.")
    if selection["unknown_values"]:
        lines.append(f"Warning: filter values absent from the pool: {json.dumps(selection['unknown_values'], sort_keys=True)}")
    return "\n\n".join(lines)


@task(name="resplit-release", cache_policy=NO_CACHE)
def resplit_task(source: str, out: str, domains, sources, hops, version, seed, domain_match, overwrite,
                 kinds: KindSelection | None = None, decisions: str | None = None,
                 absence_bases: list[str] | None = None, allow_empty: bool = False) -> str:
    """One task: the whole re-split is seconds of vectorized work over one pool."""
    return str(
        resplit(Path(source), Path(out), domains=domains, sources=sources, hops=hops, version=version, seed=seed,
                domain_match=domain_match, overwrite=overwrite, kinds=kinds,
                decisions=Path(decisions) if decisions else None, absence_bases=absence_bases,
                allow_empty=allow_empty)
    )


@flow(name="resplit", log_prints=True)
def resplit_flow(
    source: str,
    out: str,
    domains: list[str] | None = None,
    sources: list[str] | None = None,
    hops: list[int] | None = None,
    version: str | None = None,
    seed: int | None = None,
    domain_match: DomainMatch = "route",
    overwrite: bool = False,
    kinds: KindSelection | None = None,
    decisions: str | None = None,
    absence_bases: list[str] | None = None,
    allow_empty: bool = False,
) -> State:
    """Prefect flow ``resplit``: re-split a release and publish its stats as artifacts (keys ``resplit-<name>-*``).

    Calling the flow returns the new release folder; the run's Completed state names it, a Failed
    one gives the reason in one line (e.g. an empty split without ``allow_empty``)."""
    from reasonvqa.flows.artifacts import publish_artifacts

    def run() -> str:
        release = Path(resplit_task(source, out, domains, sources, hops, version, seed, domain_match, overwrite, kinds,
                                    decisions, absence_bases, allow_empty))
        publish_artifacts(release, "resplit")
        return str(release)

    return reported(run, lambda release: f"re-split release written to {release}")
