"""One retry policy for the HTTP clients (the SPARQL client, the OpenAI-compatible LLM client).

A client wraps one attempt in a function that raises ``Retryable`` for a failure worth another try
(429, 5xx, timeouts, connection errors, bodies cut short) and anything else for a failure that
retrying cannot fix. ``Retrier.call`` then:
- waits what the server asked for in ``Retry-After`` (delta-seconds or an HTTP date; the
  ``retry-after-ms`` header of OpenAI-compatible servers first), else an exponential backoff with
  jitter (``backoff_base_s * 2**retry``, capped at ``backoff_max_s``, drawn from its upper half);
- refuses to wait longer than ``max_retry_after_s`` (``WaitTooLong``): a stage fails rather than
  sleeping for an hour;
- gives up after ``attempts`` attempts (``RetriesExhausted``, with the last failure).
Each client turns the two errors into its own one-line error naming its endpoint.
"""

from __future__ import annotations

import email.utils
from email.message import Message
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a client retries."""

    attempts: int  # first try + retries
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    max_retry_after_s: float = 300.0

    def backoff(self, retry: int, rng: random.Random) -> float:
        """The delay before retry number ``retry`` (0-based) when the server named none: in [cap/2, cap]."""
        cap = min(self.backoff_max_s, self.backoff_base_s * (2**retry))
        return cap / 2 + rng.uniform(0, cap / 2)


class Retryable(Exception):
    """A failed attempt worth another; ``retry_after``: the wait the server asked for, in seconds."""

    def __init__(self, reason: str, *, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.status = status  # the HTTP status, when a response came


class RetriesExhausted(Exception):
    """Every attempt failed; ``last`` is the last failure."""

    def __init__(self, attempts: int, last: Retryable) -> None:
        super().__init__(f"{last.reason} after {attempts} attempt(s)")
        self.attempts = attempts
        self.last = last


class WaitTooLong(Exception):
    """The next wait (usually a server's Retry-After) is beyond ``max_retry_after_s``."""

    def __init__(self, delay: float, limit: float, last: Retryable) -> None:
        super().__init__(f"asked to wait {delay:.0f} s ({last.reason}), more than max_retry_after_s={limit:.0f}")
        self.delay = delay
        self.limit = limit
        self.last = last


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP date); None if absent or invalid."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def retry_after_from_headers(headers: Mapping[str, str] | Message | None, now: float) -> float | None:
    """The wait a response's headers ask for: ``retry-after-ms`` (OpenAI-compatible servers), else
    ``Retry-After``; None when neither is there or valid. ``headers`` must look names up case-insensitively
    (``http.client.HTTPMessage``, ``httpx.Headers``)."""
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds)
        except ValueError:
            value = -1.0
        if value >= 0:
            return value / 1000
    return retry_after_seconds(headers.get("retry-after"), now)


class Retrier:
    """Runs attempts under a ``RetryPolicy``; ``retries`` counts the retries made (thread-safe)."""

    def __init__(self, policy: RetryPolicy, *, name: str = "", sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> None:
        self.policy = policy
        self.name = name  # for the log line, e.g. the endpoint URL
        self.retries = 0
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()

    def call(self, attempt: Callable[[], T]) -> T:
        """``attempt()``'s result, retried on ``Retryable`` as the policy says."""
        attempts = self.policy.attempts
        for number in range(attempts):
            try:
                return attempt()
            except Retryable as failure:
                if number + 1 == attempts:
                    raise RetriesExhausted(attempts, failure) from failure
                delay = failure.retry_after
                if delay is None:
                    with self._lock:  # random.Random is not safe to share between threads
                        delay = self.policy.backoff(number, self._rng)
                if delay > self.policy.max_retry_after_s:
                    raise WaitTooLong(delay, self.policy.max_retry_after_s, failure) from failure
                with self._lock:
                    self.retries += 1
                log.warning("%s: %s; retry %d/%d in %.1f s", self.name, failure.reason, number + 1, attempts - 1, delay)
                self._sleep(delay)
        raise ValueError(f"RetryPolicy.attempts must be at least 1, got {attempts}")
