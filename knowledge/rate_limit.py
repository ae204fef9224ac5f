"""A Prefect global concurrency limit with slot decay (a rate limit) per SPARQL endpoint.

Every query a build sends to a public endpoint first takes a slot of the limit named for the
endpoint's host, in strict mode: a build on a Prefect server without that limit fails before its
first query instead of running unthrottled. The limit is created once per server:

    prefect gcl create sparql-query-wikidata-org --limit 1 --slot-decay-per-second 1

(at most one query started per second, across every build and worker using that server). The
embedded mirror and endpoints on this machine's loopback (``reasonvqa/loopback.py``) need none (``rate_limit: auto``).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Callable

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.loopback import is_loopback


class RateLimitMissing(RuntimeError):
    """The endpoint's global concurrency limit does not exist on the Prefect server."""


def rate_limit_name(endpoint: str) -> str:
    """``sparql-<host with dashes>``: ``https://query.wikidata.org/sparql`` -> ``sparql-query-wikidata-org``."""
    host = urllib.parse.urlsplit(endpoint).hostname or endpoint
    return "sparql-" + re.sub(r"[^a-z0-9]+", "-", host.lower()).strip("-")


def create_command(endpoint: str) -> str:
    """The documented command that creates the endpoint's limit."""
    return f"prefect gcl create {rate_limit_name(endpoint)} --limit 1 --slot-decay-per-second 1"


def needs_rate_limit(config: KnowledgeConfig) -> bool:
    """Whether queries to the configured endpoint must take a rate-limit slot."""
    if not config.endpoint or config.rate_limit == "off":
        return False
    if config.rate_limit == "required":
        return True
    return not is_loopback(config.endpoint)


def require_rate_limit(config: KnowledgeConfig) -> None:
    """Fail fast (RateLimitMissing, naming the command that creates it) when the endpoint needs a limit
    that the Prefect server lacks or that has no slot decay."""
    if not needs_rate_limit(config):
        return
    assert config.endpoint is not None  # needs_rate_limit checked it
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    name = rate_limit_name(config.endpoint)
    with get_client(sync_client=True) as client:
        try:
            limit = client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            raise RateLimitMissing(
                f"knowledge endpoint {config.endpoint} needs the Prefect rate limit {name!r}, which does not exist "
                f"on this Prefect server; create it with: {create_command(config.endpoint)}"
            ) from None
    if not limit.slot_decay_per_second:
        raise RateLimitMissing(f"Prefect limit {name!r} has no slot decay, so it is not a rate limit; recreate it "
                               f"with: {create_command(config.endpoint)}")


def query_throttle(config: KnowledgeConfig) -> Callable[[], None] | None:
    """What the SPARQL client calls before each request: take one slot of the endpoint's limit
    (strict: a missing limit raises), or None when the endpoint needs no limit."""
    if not needs_rate_limit(config):
        return None
    assert config.endpoint is not None  # needs_rate_limit checked it
    name = rate_limit_name(config.endpoint)

    def take_slot() -> None:
        from prefect.concurrency.sync import rate_limit

        rate_limit(name, occupy=1, strict=True)

    return take_slot
