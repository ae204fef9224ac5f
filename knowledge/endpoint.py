"""Which SPARQL endpoint a build queries: the configured one, or the embedded mirror served locally."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from reasonvqa.knowledge.config import KnowledgeConfig


@contextlib.contextmanager
def knowledge_endpoint(config: KnowledgeConfig, work: Path) -> Iterator[str]:
    """The configured SPARQL endpoint, or the embedded Oxigraph mirror served on 127.0.0.1."""
    if config.endpoint:
        yield config.endpoint
        return
    from reasonvqa.knowledge.mirror import serve_mirror

    with serve_mirror(config.mirror_entities, work / "mirror") as endpoint:
        yield endpoint


def mirror_cache_key(config: KnowledgeConfig) -> str | None:
    """Cache key of the embedded mirror (its port changes per build, its content does not)."""
    if config.endpoint:
        return None
    from reasonvqa.knowledge.mirror import mirror_cache_key as key

    return key(config.mirror_entities)


def knowledge_snapshot(config: KnowledgeConfig) -> str:
    """Content id of the knowledge base: the endpoint URL, or the mirror entities' snapshot id."""
    if config.endpoint:
        return f"endpoint:{config.endpoint}"
    from reasonvqa.knowledge.mirror import snapshot_id

    return snapshot_id(config.mirror_entities)
