"""A polite SPARQL client for the Wikidata Query Service (and anything that speaks SPARQL 1.1 HTTP).

Behaviour (the Wikidata Query Service's limits: 60 s per query, 60 s of processing per client
per minute, HTTP 429 with ``Retry-After`` beyond it, 403 for generic User-Agents):
- User-Agent ``<tool>/<version> (<contact>) SPARQLWrapper/<version>`` (Wikimedia policy);
- POST for long queries; one query in flight per client (configurable); an optional ``throttle``
  called before every request (a Prefect rate limit, ``knowledge/rate_limit.py``);
- retries follow the one policy of ``reasonvqa/retry.py``: HTTP 429 (and a 5xx that names one) waits
  ``Retry-After`` (number or HTTP date), then retries; 5xx, timeouts, connection errors, bodies cut
  short, unparsable or with malformed bindings: bounded exponential backoff with jitter; ``timeout_s``
  bounds the whole body, not each read (a server that drips its answer byte by byte is cut off);
- 400: never retried, raised with the query text; other 4xx: not retried;
- an on-disk cache keyed by endpoint (or a stable ``cache_key`` naming the knowledge
  source) + query text, with a TTL; only complete, parsed answers are cached, so a
  truncated body is never taken for a result.

``requests`` counts HTTP requests actually sent (retries included); ``cache_hits``
counts answers served from the cache.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import random
import socket
import threading
import time
import urllib.error
from importlib import metadata
from pathlib import Path
from typing import Callable, Protocol

import SPARQLWrapper as sparqlwrapper_pkg
from SPARQLWrapper import JSON, POST, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import EndPointInternalError, EndPointNotFound, QueryBadFormed, Unauthorized, URITooLong

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.retry import Retrier, RetriesExhausted, Retryable, RetryPolicy, WaitTooLong, retry_after_from_headers

log = logging.getLogger(__name__)

Binding = dict[str, dict[str, str]]


class SparqlError(RuntimeError):
    """A query that could not be answered."""


class QueryRejected(SparqlError):
    """The endpoint refused the query itself (HTTP 400): retrying cannot help."""


class EndpointUnavailable(SparqlError):
    """The endpoint did not give a complete answer within the bounded retries."""


class SparqlClient(Protocol):
    """What the linking and facts stages need from a SPARQL endpoint."""

    requests: int
    cache_hits: int

    def select(self, query: str) -> list[Binding]: ...


def user_agent(config: KnowledgeConfig) -> str:
    """``reasonvqa-pipeline/0.1.0 (<contact>) SPARQLWrapper/2.0.0``."""
    try:
        version = metadata.version("reasonvqa-pipeline")
    except metadata.PackageNotFoundError:
        version = "0"
    return f"{config.tool_name}/{version} ({config.contact}) SPARQLWrapper/{sparqlwrapper_pkg.__version__}"


class WikidataClient:
    """SPARQL SELECT client with cache, retries and a request counter."""

    def __init__(
        self,
        endpoint: str,
        config: KnowledgeConfig,
        cache_dir: Path | None,
        *,
        cache_key: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        throttle: Callable[[], None] | None = None,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"SPARQL endpoint must be an http(s) URL, got {endpoint!r}")
        self.endpoint = endpoint
        self.config = config
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        # What identifies the knowledge source in cache keys: the endpoint URL, unless the caller
        # names it stably (the embedded mirror runs on a new port each build: use its snapshot id).
        self.cache_key = cache_key or endpoint
        self.agent = user_agent(config)
        self.requests = 0
        self.cache_hits = 0
        self._clock = clock
        policy = RetryPolicy(config.max_attempts, config.backoff_base_s, config.backoff_max_s, config.max_retry_after_s)
        self._retrier = Retrier(policy, name=f"SPARQL {endpoint}", sleep=sleep, rng=rng)
        self._in_flight = threading.BoundedSemaphore(config.max_in_flight)
        self._throttle = throttle  # called before every request sent (knowledge/rate_limit.py)

    # -- public -------------------------------------------------------------
    def select(self, query: str) -> list[Binding]:
        """Run a SELECT query; return its bindings (from the cache when fresh)."""
        cached = self._cache_read(query)
        if cached is not None:
            self.cache_hits += 1
            return cached
        bindings = self._fetch(query)
        self._cache_write(query, bindings)
        return bindings

    def stats(self) -> dict[str, int]:
        return {"requests": self.requests, "cache_hits": self.cache_hits, "retries": self.retries}

    @property
    def retries(self) -> int:
        """Retries made (requests beyond the first of each query)."""
        return self._retrier.retries

    # -- network ------------------------------------------------------------
    def _fetch(self, query: str) -> list[Binding]:
        def attempt() -> list[Binding]:
            with self._in_flight:
                if self._throttle is not None:
                    self._throttle()
                return self._request(query)

        try:
            return self._retrier.call(attempt)
        except WaitTooLong as error:
            raise EndpointUnavailable(f"{self.endpoint}: {error}; giving up") from None
        except RetriesExhausted as error:
            status = error.last.status
            got = f"HTTP {status}" if status is not None else "no complete answer"
            raise EndpointUnavailable(f"{self.endpoint}: {got} after {error.attempts} attempt(s) "
                                      f"({error.attempts - 1} retries); last error: {error.last.reason}") from None

    def _request(self, query: str) -> list[Binding]:
        wrapper = SPARQLWrapper(self.endpoint, agent=self.agent)
        wrapper.setQuery(query)
        wrapper.setReturnFormat(JSON)
        wrapper.setTimeout(int(max(1, self.config.timeout_s)))
        if len(query) >= self.config.post_min_chars:
            wrapper.setMethod(POST)
        self.requests += 1
        deadline = time.monotonic() + self.config.timeout_s
        try:
            response = wrapper.query().response
            body = _read_before(response, deadline, self.config.timeout_s)
        except QueryBadFormed as error:
            raise QueryRejected(f"{self.endpoint} rejected the query (HTTP 400): {_short(error)}\nQuery:\n{query}") from None
        except EndPointInternalError as error:
            raise Retryable(f"HTTP 500: {_short(error)}", status=500) from None
        except (EndPointNotFound, Unauthorized, URITooLong) as error:
            raise EndpointUnavailable(f"{self.endpoint}: {_short(error)}") from None
        except urllib.error.HTTPError as error:
            if error.code == 429 or error.code >= 500:
                wait = retry_after_from_headers(error.headers, self._clock())
                reason = "HTTP 429 Too Many Requests" if error.code == 429 else f"HTTP {error.code}"
                raise Retryable(reason, retry_after=wait, status=error.code) from None
            detail = error.read()[:300].decode("utf-8", "replace")
            raise EndpointUnavailable(f"{self.endpoint}: HTTP {error.code} {error.reason}: {detail}") from None
        except urllib.error.URLError as error:
            raise Retryable(f"connection failed: {error.reason}") from None
        except (TimeoutError, socket.timeout, ConnectionError, OSError, http.client.HTTPException) as error:
            # HTTPException: IncompleteRead (the connection dropped mid-body), BadStatusLine, ...
            raise Retryable(f"{type(error).__name__}: {error}") from None
        return _parse_bindings(body, response.status)

    # -- cache --------------------------------------------------------------
    def _cache_path(self, query: str) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(f"{self.cache_key}\n{query}".encode()).hexdigest()
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cache_read(self, query: str) -> list[Binding] | None:
        path = self._cache_path(query)
        if path is None or not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            if entry.get("source") != self.cache_key or entry.get("query") != query:
                return None
            age_days = (self._clock() - float(entry.get("fetched_at", 0))) / 86400
        except (OSError, ValueError, AttributeError, TypeError):
            return None  # a damaged cache file is simply refetched
        if age_days > self.config.cache_ttl_days or not entry.get("complete") or not isinstance(entry.get("bindings"), list):
            return None
        return entry["bindings"]

    def _cache_write(self, query: str, bindings: list[Binding]) -> None:
        path = self._cache_path(query)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {"source": self.cache_key, "query": query, "fetched_at": self._clock(), "complete": True, "bindings": bindings}
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)


def _read_before(response, deadline: float, timeout_s: float, chunk: int = 1 << 16) -> bytes:
    """The whole body, or ``Retryable`` once ``deadline`` passes: the socket timeout bounds each read,
    not a server that sends its body a few bytes at a time."""
    parts = []
    while True:
        if time.monotonic() > deadline:
            raise Retryable(f"no complete answer within timeout_s={timeout_s:g} s ({sum(map(len, parts))} bytes read)",
                             status=response.status)
        part = response.read1(chunk)
        if not part:
            if response.length:  # the connection closed before Content-Length bytes came
                raise http.client.IncompleteRead(b"".join(parts), response.length)
            return b"".join(parts)
        parts.append(part)


def _parse_bindings(body: bytes, status: int | None = None) -> list[Binding]:
    """The bindings of a complete, well-formed SPARQL JSON result; anything else is a transient failure
    (and is never cached): each binding maps variable names to terms with a string ``type`` and ``value``."""
    try:
        document = json.loads(body)
        bindings = document["results"]["bindings"]
        variables = document["head"]["vars"]
    except (ValueError, KeyError, TypeError) as error:
        raise Retryable(f"incomplete or unparsable SPARQL JSON ({len(body)} bytes): {error}", status=status) from None
    if not isinstance(bindings, list) or not isinstance(variables, list):
        raise Retryable("SPARQL JSON without a bindings list", status=status)
    for row, binding in enumerate(bindings):
        if not isinstance(binding, dict) or not all(
            isinstance(name, str) and isinstance(term, dict) and isinstance(term.get("type"), str)
            and isinstance(term.get("value"), str) for name, term in binding.items()
        ):
            raise Retryable(f"malformed SPARQL JSON binding {row}: {_short(ValueError(json.dumps(binding)[:200]))}",
                             status=status)
    return bindings


def _short(error: Exception) -> str:
    text = str(error).replace("\n", " ")
    return text if len(text) <= 500 else text[:500] + "..."
