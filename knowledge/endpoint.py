"""Which SPARQL endpoint a build queries (the configured one, or the embedded mirror served locally),
and the ids that name its knowledge: the fetch key (what a build may reuse) and the snapshot date."""

from __future__ import annotations

import contextlib
import hashlib
from datetime import datetime
from pathlib import Path
from typing import Iterator

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.refresh import period_label, utc_now


@contextlib.contextmanager
def knowledge_endpoint(config: KnowledgeConfig, work: Path) -> Iterator[str]:
    """The configured SPARQL endpoint, or the embedded Oxigraph mirror served on 127.0.0.1."""
    if config.endpoint:
        yield config.endpoint
        return
    from reasonvqa.knowledge.mirror import serve_mirror, shared_store
    from reasonvqa.work_files import reusable_dir

    # the store: one per entity content in the user cache (shared by every build); its server's log in the
    # work folder (for a work folder URL: in this process's scratch, never uploaded)
    with serve_mirror(config.mirror_entities, reusable_dir(work / "mirror"),
                      location=shared_store(config.mirror_entities)) as endpoint:
        yield endpoint



@contextlib.contextmanager
def replay_endpoint() -> Iterator[str]:
    """The "endpoint" of a build that replays a release's recorded answers: none is started or queried."""
    yield "replay:"

def source_cache_key(config: KnowledgeConfig, as_of: datetime | None = None) -> str:
    """Cache key of the knowledge source: the mirror's content (its port changes per build, its content
    does not), or the endpoint and its refresh period (a new period misses the cache and refetches)."""
    if config.endpoint:
        return knowledge_snapshot(config, as_of)
    from reasonvqa.knowledge.mirror import mirror_cache_key as key

    return key(config.mirror_entities)


def knowledge_snapshot(config: KnowledgeConfig, as_of: datetime | None = None) -> str:
    """Id of the knowledge a build reads: the mirror entities' content hash, or
    ``endpoint:<url>@<refresh period>`` (``endpoint:<url>`` when ``refresh`` is null)."""
    if config.endpoint:
        if config.refresh is None:
            return f"endpoint:{config.endpoint}"
        return f"endpoint:{config.endpoint}@{period_label(as_of or utc_now(), config.refresh)}"
    from reasonvqa.knowledge.mirror import snapshot_id

    return snapshot_id(config.mirror_entities)


def knowledge_date(config: KnowledgeConfig, as_of: datetime | None = None) -> str:
    """The date the knowledge is as of: configured, else the endpoint's refresh period, else the mirror
    entities' newest ``modified`` date."""
    if config.snapshot_date:
        return config.snapshot_date
    if config.endpoint:
        if config.refresh is None:
            return "undated (live endpoint without refresh; set knowledge.snapshot_date or knowledge.refresh)"
        return period_label(as_of or utc_now(), config.refresh)
    from reasonvqa.knowledge.mirror import snapshot_date

    return snapshot_date(config.mirror_entities) or "undated (no entity carries a modified date)"


def facts_content_id(config: KnowledgeConfig, facts_path: Path, mirror_snapshot: str) -> str:
    """What question rows name as their knowledge: the mirror's snapshot id, or for a live endpoint the
    content hash of the facts fetched (rows sorted), so a refetch that finds the same facts yields the
    same questions, byte for byte."""
    if not config.endpoint:
        return mirror_snapshot
    import polars as pl

    facts = pl.read_parquet(facts_path)
    canonical = facts.sort(facts.columns, nulls_last=True).write_ndjson()
    return f"endpoint:{config.endpoint}#facts-sha256:{hashlib.sha256(canonical.encode()).hexdigest()}"
