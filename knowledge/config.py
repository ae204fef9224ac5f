"""Configuration of the knowledge stages (linking, facts, the SPARQL client)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from reasonvqa.paths import DATA_DIR


class KnowledgeConfig(BaseModel):
    """Where knowledge comes from and how the client behaves."""

    endpoint: str | None = Field(
        default=None,
        description="SPARQL endpoint URL; null = start the embedded Oxigraph mirror on 127.0.0.1.",
    )
    mirror_entities: Path = Field(
        default=DATA_DIR / "knowledge" / "entities.jsonl",
        description="Wikidata entities (JSON dump format) the embedded mirror is built from.",
    )
    batch_size: int = Field(default=200, ge=1, le=1000, description="Entity ids per VALUES query.")
    max_hops: int = Field(default=3, ge=1, le=3)
    cache_dir: Path | None = Field(default=None, description="Query cache folder; null = <work>/_sparql_cache.")
    cache_ttl_days: float = Field(default=30.0, ge=0)
    contact: str = Field(
        default="https://github.com/reasonvqa/reasonvqa-pipeline",
        description="Contact URL or email sent in the User-Agent (Wikimedia policy).",
    )
    hypernym_fallback: bool = Field(default=True, description="Link a synset through its hypernyms when it has no P8814 item.")
    max_hypernym_depth: int = Field(default=2, ge=0, le=10)
