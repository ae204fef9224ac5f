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
- answers cached in the pipeline's one call cache (``reasonvqa/call_cache.py``: one JSON-lines file
  per shard, ``query_cache``) keyed by endpoint (or a stable ``cache_key`` naming the knowledge
  source) + query text, taken while younger than ``cache_ttl_days``; only complete, parsed answers
  are cached, so a truncated body is never taken for a result.

``requests`` counts HTTP requests actually sent (retries included); ``cache_hits``
counts answers served from the cache.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import random
import socket
import threading
import time
import urllib.error
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator, Protocol

import SPARQLWrapper as sparqlwrapper_pkg
from SPARQLWrapper import JSON, POST, SPARQLWrapper
from SPARQLWrapper.SPARQLExceptions import EndPointInternalError, EndPointNotFound, QueryBadFormed, Unauthorized, URITooLong

from reasonvqa.call_cache import CallCache
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.locks import exclusive_lock
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
    """What the linking and facts stages need from a SPARQL endpoint (the counters are only read)."""

    @property
    def requests(self) -> int: ...

    @property
    def cache_hits(self) -> int: ...

    def select(self, query: str) -> list[Binding]: ...


class WrappedClient:
    """Base of a ``SparqlClient`` around ``client`` whose request and cache counts are the wrapped client's."""

    def __init__(self, client: SparqlClient) -> None:
        self.client = client

    @property
    def requests(self) -> int:
        return self.client.requests

    @property
    def cache_hits(self) -> int:
        return self.client.cache_hits


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
        cache: CallCache | None,
        *,
        cache_key: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        throttle: Callable[[], None] | None = None,
    ) -> None:
        """``cache``: the shard's answer cache (``query_cache``), None for no cache."""
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"SPARQL endpoint must be an http(s) URL, got {endpoint!r}")
        self.endpoint = endpoint
        self.config = config
        self.cache = cache
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
        self._count_lock = threading.Lock()
        self._throttle = throttle  # called before every request sent (knowledge/rate_limit.py)

    # -- public -------------------------------------------------------------
    def select(self, query: str) -> list[Binding]:
        """Run a SELECT query; return its bindings (from the cache when fresh)."""
        if self.cache is None:
            return self._fetch(query)
        fetched: list[bool] = []

        def fetch() -> list[Binding]:
            fetched.append(True)
            return self._fetch(query)

        bindings = self.cache.call(f"sparql {self.cache_key}", query, fetch, max_age_s=self.config.cache_ttl_days * 86400)
        if not fetched:  # answered from the file, or by the same query in flight on another thread
            with self._count_lock:
                self.cache_hits += 1
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

QUERY_CACHE_MAX_ENTRY_BYTES = 256 * 2**20  # one answer; a WDQS answer is bounded by its 60 s limit


@contextlib.contextmanager
def query_cache(cache_dir: Path | None, name: str, clock: Callable[[], float] = time.time) -> Iterator[CallCache | None]:
    """The answer cache of one shard's queries, ``<cache_dir>/<name>.jsonl`` (None without ``cache_dir``),
    held under ``<name>.lock`` while open: builds that share a cache folder take turns on a shard's file."""
    if cache_dir is None:
        yield None
        return
    cache_dir = Path(cache_dir)
    with exclusive_lock(cache_dir / f"{name}.lock", "SPARQL cache"), \
            CallCache(cache_dir / f"{name}.jsonl", max_entry_bytes=QUERY_CACHE_MAX_ENTRY_BYTES, clock=clock) as cache:
        yield cache


def _read_before(response, deadline: float, timeout_s: float, chunk: int = 1 << 16) -> bytes:
    """The whole body, or ``Retryable`` once ``deadline`` passes: the socket timeout bounds each read,
    not a server that sends its body a few bytes at a time."""
    parts: list[bytes] = []
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
