"""What a build is made from, checked before any work: the inputs' content ids and the work folder key.

``input_snapshots`` names every input by content (each source's annotation files, the knowledge
base, the versions of the non-template question kinds); ``work_key`` hashes them with the config and
the code into the work folder's name, so a changed input, config or reader never reuses old shards.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

from reasonvqa import sources
from reasonvqa.flows.config import BuildConfig
from reasonvqa.knowledge.endpoint import knowledge_date, knowledge_snapshot
from reasonvqa.knowledge.rate_limit import require_rate_limit
from reasonvqa.tasks.release.knowledge_source import SourceKnowledge
from reasonvqa.snapshot import code_fingerprint
from reasonvqa.tasks.questions.bank import load_bank
from reasonvqa.tasks.questions.grounded import rules_version
from reasonvqa.tasks.questions.grounded_vlm import prompt_versions
from reasonvqa.tasks.release.writer import sha256_file


def check_build_inputs(config: BuildConfig, needs_mirror: bool = True) -> None:
    """Refuse a build that cannot finish, before any work: each source's own check
    (FileNotFoundError naming a missing folder or file), the mirror's entities (unless the knowledge
    comes from a release: ``needs_mirror`` False), the domains."""
    for source in config.sources:
        sources.get(source.kind).check(source)
    if needs_mirror and not config.knowledge.endpoint and not config.knowledge.mirror_entities.exists():
        raise FileNotFoundError(f"knowledge mirror entities not found: {config.knowledge.mirror_entities}")
    load_bank().property_ids(config.questions.domains)  # raises on an unknown domain


def check_build(config: BuildConfig, recorded: SourceKnowledge | None) -> None:
    """``check_build_inputs``, then, for a build that queries the knowledge base (not a replay of
    ``recorded`` answers), the endpoint's rate limit on the Prefect server (``require_rate_limit``)."""
    check_build_inputs(config, needs_mirror=recorded is None)
    if recorded is None:  # a replay sends no query
        require_rate_limit(config.knowledge)


def input_snapshots(config: BuildConfig, as_of: datetime, recorded: SourceKnowledge | None = None) -> dict[str, str]:
    """Content ids of every input: each source's annotation files and the knowledge base (a live
    endpoint's by its refresh period holding ``as_of``; with ``recorded``, the ``knowledge`` and
    ``knowledge_date`` of the release rebuilt from, as its manifest names them)."""
    inputs = {f"source:{s.kind}": sources.get(s.kind).snapshot(s) for s in config.sources}
    if recorded is not None:
        inputs |= recorded.inputs
    else:
        inputs["knowledge"] = knowledge_snapshot(config.knowledge, as_of)
        inputs["knowledge_date"] = knowledge_date(config.knowledge, as_of)
    return inputs | question_kind_inputs(config)


def question_kind_inputs(config: BuildConfig) -> dict[str, str]:
    """Versions of what non-template kinds are made from: grounded rules, VLM prompts, a verified-QA file."""
    inputs = {}
    if config.grounded.enabled:
        inputs["grounded_rules"] = rules_version()
        if config.grounded.vlm is not None:
            inputs |= {f"prompt:{name}": version for name, version in prompt_versions().items()}
    if config.verified_questions is not None:
        inputs["verified_questions"] = "sha256:" + sha256_file(Path(config.verified_questions))
    return inputs


def work_key(config: BuildConfig, inputs: dict[str, str], recorded: SourceKnowledge | None = None) -> str:
    """Work-folder name: changes with the config, the inputs or the pipeline's code (sources' included).
    A rebuild from ``recorded`` answers never reuses the work of a build that queried (nor the reverse)."""
    keyed = inputs | ({"knowledge_replay": recorded.answers_digest} if recorded is not None else {})
    readers = {s.kind: sources.source_class(s.kind).code_id() for s in config.sources}
    key = json.dumps([config.config_hash(), keyed, code_fingerprint(), readers], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def exhaustive_labels(config: BuildConfig) -> dict[str, list[str] | None]:
    """Source kind -> the labels its annotations cover exhaustively: a source config's ``exhaustive_labels``, or
    None where the source declares its own categories exhaustive (nuScenes); kinds with neither are left out."""
    out: dict[str, list[str] | None] = {}
    for source in config.sources:
        declared = source.exhaustive_labels
        if declared is None and not sources.get(source.kind).exhaustive_taxonomy:
            continue
        if source.kind in out and out[source.kind] != declared:
            raise ValueError(f"sources of kind {source.kind!r} declare different exhaustive_labels; give one list")
        out[source.kind] = sorted(declared) if declared is not None else None
    return out
