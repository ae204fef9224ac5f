"""Configuration of the knowledge stages (linking, facts, the SPARQL client)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.paths import DATA_DIR

KNOWLEDGE_DATA_DIR = DATA_DIR / "knowledge"


class KnowledgeConfig(BaseModel):
    """Where knowledge comes from and how the client behaves.

    The defaults follow the Wikidata Query Service rules (60 s of processing per
    client per minute, HTTP 429 with Retry-After beyond it): one query in flight, 429 + Retry-After honoured, bounded retries, a
    policy-conformant User-Agent, POST for long queries.
    """

    model_config = ConfigDict(extra="forbid")

    endpoint: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+\S*$",
        description="SPARQL endpoint http(s) URL; null = start the embedded Oxigraph mirror on 127.0.0.1.",
    )
    snapshot_date: str | None = Field(
        default=None,
        pattern=r"^\d{4}-\d\d-\d\d$",
        description="Date the knowledge is as of (YYYY-MM-DD), recorded in the manifest; null = the newest "
        "`modified` date of the mirror's entities (an endpoint without it is recorded as undated).",
    )
    refresh: str | None = Field(
        default="1d",
        pattern=r"^[1-9]\d*[mhd]$",
        description="How long a live endpoint's facts stay current (minutes m, hours h, days d): builds in the "
        "same period reuse them, the first build of a new period fetches them again. null = fetch once, reuse "
        "while cached. The embedded mirror is identified by its content and ignores this.",
    )
    rate_limit: Literal["auto", "required", "off"] = Field(
        default="auto",
        description="Queries to the endpoint take a slot of the Prefect global concurrency limit named for it "
        "(knowledge/rate_limit.py). auto = required for any endpoint off this machine, off for 127.0.0.1 "
        "and the embedded mirror; required = a build without that limit fails before its first query.",
    )
    mirror_entities: Path = Field(
        default=KNOWLEDGE_DATA_DIR / "entities",
        description=(
            "Wikidata entities the embedded mirror is built from: a file or a folder of files in the "
            "JSON dump format (one entity per line, the `[...]` dump, or Special:EntityData JSON; .gz/.bz2 ok)."
        ),
    )
    batch_size: int = Field(default=200, ge=1, le=1000, description="Entity ids per VALUES query.")
    max_hops: int = Field(default=3, ge=1, le=3)
    cache_dir: Path | None = Field(default=None, description="Query cache folder; null = <work>/_sparql_cache.")
    cache_ttl_days: float = Field(default=30.0, ge=0, description="Cached answers older than this are fetched again.")
    contact: str = Field(
        default="https://github.com/reasonvqa/reasonvqa-pipeline",
        min_length=3,
        pattern=r"^[^\x00-\x1f\x7f]+$",  # no CR/LF or other control characters: it goes into an HTTP header
        description="Contact URL or email sent in the User-Agent (Wikimedia policy).",
    )
    tool_name: str = Field(default="reasonvqa-pipeline", pattern=r"^[A-Za-z0-9._-]+$", description="Tool name in the User-Agent.")
    hypernym_fallback: bool = Field(default=True, description="Link a synset through its hypernyms when it has no P8814 item.")
    max_hypernym_depth: int = Field(
        default=1, ge=0, le=10, description="Hypernym levels tried; deeper links reach abstract classes (cable.n.01 -> message at 2)."
    )
    wordnet_source: Literal["auto", "nltk", "table"] = Field(
        default="auto",
        description="WordNet 3.0 -> 3.1 mapping: NLTK readers (needs wordnet + wordnet31 corpora), the bundled table, or auto.",
    )
    wordnet_table: Path = Field(
        default=KNOWLEDGE_DATA_DIR / "wordnet" / "wn30_nouns.tsv.gz",
        description="Bundled WordNet 3.0 noun table: name, 3.0 offset, ILI, 3.1 offset, 3.0 hypernym offsets.",
    )
    # HTTP behaviour
    timeout_s: float = Field(default=65.0, gt=0, description="Socket timeout per request (WDQS kills queries at 60 s).")
    max_attempts: int = Field(default=5, ge=1, le=20, description="Attempts per query (first try + retries).")
    backoff_base_s: float = Field(default=1.0, ge=0, description="First retry delay for 5xx / timeouts; doubles per attempt.")
    backoff_max_s: float = Field(default=60.0, ge=0, description="Upper bound of one backoff delay.")
    max_retry_after_s: float = Field(
        default=300.0, ge=0, description="A 429 asking to wait longer than this fails the stage instead of sleeping."
    )
    post_min_chars: int = Field(default=1500, ge=0, description="Queries at least this long are sent with POST.")
    max_in_flight: int = Field(default=1, ge=1, le=8, description="Concurrent queries per client (WDQS asks for one).")
    label_language: str = Field(default="en", pattern=r"^[a-z]{2,3}(-[a-z0-9]+)*$")
