"""The one retry policy of the HTTP clients (reasonvqa/retry.py)."""

import random
from email.utils import formatdate

import httpx
import pytest

from reasonvqa.retry import (
    Retrier, RetriesExhausted, Retryable, RetryPolicy, WaitTooLong, retry_after_from_headers, retry_after_seconds,
)

NOW = 1_700_000_000.0


@pytest.mark.parametrize("value, seconds", [
    ("7", 7.0), (" 0 ", 0.0), (formatdate(NOW + 30, usegmt=True), 30.0),
    (formatdate(NOW - 30, usegmt=True), 0.0),  # a date in the past: retry now
    (None, None), ("soon", None), ("-5", None), ("1.5", None),  # RFC 9110: delta-seconds is digits only
])
def test_retry_after_values(value, seconds):
    assert retry_after_seconds(value, NOW) == seconds


def test_retry_after_ms_comes_first_and_names_are_case_insensitive():
    assert retry_after_from_headers(httpx.Headers({"Retry-After": "2", "retry-after-ms": "250"}), NOW) == 0.25
    assert retry_after_from_headers(httpx.Headers({"RETRY-AFTER": "2"}), NOW) == 2.0
    assert retry_after_from_headers(httpx.Headers({"retry-after-ms": "x", "Retry-After": "3"}), NOW) == 3.0
    assert retry_after_from_headers(httpx.Headers({}), NOW) is None
    assert retry_after_from_headers(None, NOW) is None


def test_backoff_doubles_within_its_upper_half_and_is_capped():
    policy = RetryPolicy(attempts=9, backoff_base_s=1.0, backoff_max_s=5.0)
    rng = random.Random(0)
    delays = [policy.backoff(retry, rng) for retry in range(5)]
    for retry, delay in enumerate(delays):
        cap = min(5.0, 2.0**retry)
        assert cap / 2 <= delay <= cap


class Script:
    """An attempt that fails with the given failures, then returns "done"."""

    def __init__(self, *failures: Retryable) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def test_retry_after_wins_over_backoff():
    sleeps: list[float] = []
    retrier = Retrier(RetryPolicy(attempts=3, backoff_base_s=0.5), sleep=sleeps.append, rng=random.Random(1))
    attempt = Script(Retryable("HTTP 429", retry_after=12.0, status=429), Retryable("HTTP 502", status=502))
    assert retrier.call(attempt) == "done"
    assert attempt.calls == 3 and retrier.retries == 2
    assert sleeps[0] == 12.0 and 0.5 <= sleeps[1] <= 1.0


def test_gives_up_after_the_attempts_with_the_last_failure():
    sleeps: list[float] = []
    retrier = Retrier(RetryPolicy(attempts=3, backoff_base_s=0.0), sleep=sleeps.append)
    attempt = Script(*(Retryable(f"HTTP 50{n}", status=500 + n) for n in range(5)))
    with pytest.raises(RetriesExhausted) as raised:
        retrier.call(attempt)
    assert (raised.value.attempts, raised.value.last.status, raised.value.last.reason) == (3, 502, "HTTP 502")
    assert attempt.calls == 3 and sleeps == [0.0, 0.0]


def test_a_wait_beyond_the_limit_fails_without_sleeping():
    sleeps: list[float] = []
    retrier = Retrier(RetryPolicy(attempts=5, max_retry_after_s=60), sleep=sleeps.append)
    with pytest.raises(WaitTooLong, match=r"asked to wait 3600 s \(HTTP 429\), more than max_retry_after_s=60"):
        retrier.call(Script(Retryable("HTTP 429", retry_after=3600.0)))
    assert sleeps == [] and retrier.retries == 0


def test_other_errors_are_not_retried():
    retrier = Retrier(RetryPolicy(attempts=5), sleep=lambda s: None)

    def refused() -> str:
        raise PermissionError("HTTP 403")

    with pytest.raises(PermissionError):
        retrier.call(refused)
    assert retrier.retries == 0
