"""The SPARQL client against a scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from email.utils import formatdate

import pytest

from reasonvqa.call_cache import CallCache
from reasonvqa.knowledge.wikidata import EndpointUnavailable, QueryRejected, WikidataClient, query_cache, user_agent
from tests.knowledge.helpers import Reply, sparql_json

QUERY = 'SELECT ?item WHERE { VALUES ?wn { "02086723-n" } ?item <http://www.wikidata.org/prop/direct/P8814> ?wn }'
OK = Reply(200, sparql_json([{"item": "http://www.wikidata.org/entity/Q144"}]))


def cached_answers(folder) -> int:
    """How many answers the shard cache ``<folder>/shard.jsonl`` holds (as a new reader of the file sees it)."""
    with CallCache(folder / "shard.jsonl") as cache:
        return len(cache)


class Recorder:
    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def test_429_with_retry_after_waits_then_retries(sparql_server, fast_config):
    sparql_server.script = [Reply(429, b"slow down", {"Retry-After": "1"}), OK]
    client = WikidataClient(sparql_server.url, fast_config, cache=None)

    rows = client.select(QUERY)

    assert rows[0]["item"]["value"] == "http://www.wikidata.org/entity/Q144"
    assert client.requests == 2
    first, second = sparql_server.seen
    assert second.at - first.at >= 1.0  # the client really waited Retry-After


def test_503_with_retry_after_waits_it(sparql_server, fast_config):
    sparql_server.script = [Reply(503, b"busy", {"Retry-After": "1"}), OK]
    client = WikidataClient(sparql_server.url, fast_config.model_copy(update={"backoff_base_s": 0.01}), cache=None)

    assert len(client.select(QUERY)) == 1
    first, second = sparql_server.seen
    assert second.at - first.at >= 1.0 and client.retries == 1  # the backoff alone would be 0.01 s


def test_retry_after_as_http_date(sparql_server, fast_config):
    now = 1_700_000_000.0
    sparql_server.script = [Reply(429, b"", {"Retry-After": formatdate(now + 7, usegmt=True)}), OK]
    sleep = Recorder()
    client = WikidataClient(sparql_server.url, fast_config, cache=None, sleep=sleep, clock=lambda: now)

    client.select(QUERY)

    assert sleep.sleeps == [7.0]


def test_retry_after_beyond_limit_fails_instead_of_sleeping(sparql_server, fast_config):
    sparql_server.script = [Reply(429, b"", {"Retry-After": "3600"})]
    sleep = Recorder()
    client = WikidataClient(sparql_server.url, fast_config.model_copy(update={"max_retry_after_s": 60}), None, sleep=sleep)

    with pytest.raises(EndpointUnavailable, match="asked to wait 3600 s"):
        client.select(QUERY)
    assert sleep.sleeps == [] and client.requests == 1


def test_500_backs_off_then_succeeds(sparql_server, fast_config):
    sparql_server.script = [Reply(500, b"java.util.concurrent.TimeoutException"), Reply(503, b""), OK]
    sleep = Recorder()
    client = WikidataClient(sparql_server.url, fast_config, cache=None, sleep=sleep)

    assert len(client.select(QUERY)) == 1
    assert client.requests == 3
    # exponential: attempt 0 in [base/2, base], attempt 1 in [base, 2*base]
    assert fast_config.backoff_base_s / 2 <= sleep.sleeps[0] <= fast_config.backoff_base_s
    assert fast_config.backoff_base_s <= sleep.sleeps[1] <= 2 * fast_config.backoff_base_s


def test_backoff_is_bounded(sparql_server, fast_config):
    config = fast_config.model_copy(update={"backoff_base_s": 10.0, "backoff_max_s": 12.0, "max_attempts": 5})
    sparql_server.script = [Reply(502, b"")]
    sleep = Recorder()
    client = WikidataClient(sparql_server.url, config, cache=None, sleep=sleep)

    with pytest.raises(EndpointUnavailable, match=r"HTTP 502 after 5 attempt\(s\) \(4 retries\); last error: HTTP 502"):
        client.select(QUERY)
    assert client.requests == 5 and len(sleep.sleeps) == 4
    assert all(s <= 12.0 for s in sleep.sleeps)


def test_400_fails_at_once_with_the_query(sparql_server, fast_config):
    sparql_server.script = [Reply(400, b"Parse error: Encountered \"}\"")]
    sleep = Recorder()
    client = WikidataClient(sparql_server.url, fast_config, cache=None, sleep=sleep)

    with pytest.raises(QueryRejected) as raised:
        client.select(QUERY)
    assert client.requests == 1 and sleep.sleeps == []
    assert QUERY in str(raised.value) and "Parse error" in str(raised.value)


def test_truncated_answer_is_retried_and_never_cached(sparql_server, fast_config, tmp_path):
    partial = sparql_json([{"item": "http://www.wikidata.org/entity/Q144"}])[:-20]
    sparql_server.script = [Reply(200, partial)]
    with query_cache(tmp_path, "shard") as cache:
        client = WikidataClient(sparql_server.url, fast_config, cache, sleep=Recorder())
        with pytest.raises(EndpointUnavailable, match="incomplete or unparsable"):
            client.select(QUERY)
    assert client.requests == fast_config.max_attempts
    assert cached_answers(tmp_path) == 0


def test_connection_dropped_mid_body_is_retried_and_never_cached(sparql_server, fast_config, tmp_path):
    body = sparql_json([{"item": "http://www.wikidata.org/entity/Q144"}])
    sparql_server.script = [Reply(200, body[:30], declared_length=len(body)), OK]
    with query_cache(tmp_path, "shard") as cache:
        client = WikidataClient(sparql_server.url, fast_config, cache, sleep=Recorder())
        assert client.select(QUERY)[0]["item"]["value"] == "http://www.wikidata.org/entity/Q144"
        assert client.requests == 2 and client.retries == 1

        sparql_server.script = [Reply(200, body[:30], declared_length=len(body))]
        with pytest.raises(EndpointUnavailable, match="IncompleteRead"):
            client.select(QUERY + " LIMIT 1")
    assert cached_answers(tmp_path) == 1  # only the complete answer


def test_unreachable_endpoint_fails_after_bounded_retries(fast_config):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleep = Recorder()
    client = WikidataClient(f"http://127.0.0.1:{port}/sparql", fast_config, cache=None, sleep=sleep)

    with pytest.raises(EndpointUnavailable, match="connection failed"):
        client.select(QUERY)
    assert client.requests == fast_config.max_attempts and len(sleep.sleeps) == fast_config.max_attempts - 1


def test_timeout_is_retried(sparql_server, fast_config):
    sparql_server.script = [Reply(200, sparql_json([]), delay_s=1.5), OK]
    client = WikidataClient(sparql_server.url, fast_config.model_copy(update={"timeout_s": 1}), None, sleep=Recorder())

    assert len(client.select(QUERY)) == 1
    assert client.requests == 2


def test_a_dripping_body_is_cut_off_at_the_total_deadline(sparql_server, fast_config, tmp_path):
    # each byte arrives well within the socket timeout; the whole body would take ~4 s
    body = sparql_json([{"item": "http://www.wikidata.org/entity/Q144"}])
    sparql_server.script = [Reply(200, body, drip_s=4 / len(body)), OK]
    with query_cache(tmp_path, "shard") as cache:
        client = WikidataClient(sparql_server.url, fast_config.model_copy(update={"timeout_s": 1}), cache, sleep=Recorder())
        assert len(client.select(QUERY)) == 1
    assert client.requests == 2 and client.retries == 1 and cached_answers(tmp_path) == 1


@pytest.mark.parametrize("bindings", [[{"item": "Q144"}], ["Q144"], [{"item": {"type": "uri"}}],
                                      [{"item": {"type": "uri", "value": 144}}]])
def test_malformed_bindings_are_retried_and_never_cached(sparql_server, fast_config, tmp_path, bindings):
    bad = json.dumps({"head": {"vars": ["item"]}, "results": {"bindings": bindings}}).encode()
    sparql_server.script = [Reply(200, bad)]
    with query_cache(tmp_path, "shard") as cache:
        client = WikidataClient(sparql_server.url, fast_config, cache, sleep=Recorder())
        with pytest.raises(EndpointUnavailable, match="malformed SPARQL JSON binding 0"):
            client.select(QUERY)
    assert cached_answers(tmp_path) == 0
    sparql_server.script = [OK]
    with query_cache(tmp_path, "shard") as cache:
        assert WikidataClient(sparql_server.url, fast_config, cache).select(QUERY)[0]["item"]["value"] \
            == "http://www.wikidata.org/entity/Q144"
    assert cached_answers(tmp_path) == 1


def test_a_failing_endpoint_is_one_line_with_url_status_and_retries(sparql_server, fast_config):
    sparql_server.script = [Reply(503, b"busy")]
    client = WikidataClient(sparql_server.url, fast_config, None, sleep=Recorder())

    with pytest.raises(EndpointUnavailable) as error:
        client.select(QUERY)
    attempts = fast_config.max_attempts
    assert str(error.value) == (f"{sparql_server.url}: HTTP 503 after {attempts} attempt(s) ({attempts - 1} retries); "
                                "last error: HTTP 503")


def test_warm_cache_makes_no_request(sparql_server, fast_config, tmp_path):
    sparql_server.script = [OK]
    with query_cache(tmp_path, "shard") as cache:
        cold = WikidataClient(sparql_server.url, fast_config, cache)
        first = cold.select(QUERY)
    with query_cache(tmp_path, "shard") as cache:  # a later build reads the file back
        warm = WikidataClient(sparql_server.url, fast_config, cache)
        second = warm.select(QUERY)

    assert second == first
    assert (cold.requests, warm.requests, warm.cache_hits) == (1, 0, 1)
    assert len(sparql_server.seen) == 1


def test_cache_is_keyed_by_endpoint_and_query_and_expires(sparql_server, fast_config, tmp_path):
    sparql_server.script = [OK]
    now = [1_000_000.0]
    with query_cache(tmp_path, "shard", clock=lambda: now[0]) as cache:
        client = WikidataClient(sparql_server.url, fast_config, cache)
        client.select(QUERY)
        client.select(QUERY + " LIMIT 1")  # other text: other key
        assert client.requests == 2

        other_endpoint = WikidataClient(sparql_server.url + "?x=1", fast_config, cache)
        other_endpoint.select(QUERY)
        assert other_endpoint.requests == 1

        now[0] += fast_config.cache_ttl_days * 86400
        client.select(QUERY)
        assert (client.requests, client.cache_hits) == (2, 1)  # exactly cache_ttl_days old: still taken
        now[0] += 86400
        client.select(QUERY)
        assert client.requests == 3


@pytest.mark.parametrize("damage", ["torn", "not json", "no time"])
def test_damaged_cache_entry_is_fetched_again(sparql_server, fast_config, tmp_path, damage):
    sparql_server.script = [OK]
    with query_cache(tmp_path, "shard") as cache:
        WikidataClient(sparql_server.url, fast_config, cache).select(QUERY)
    path = tmp_path / "shard.jsonl"
    header, entry = path.read_text(encoding="utf-8").splitlines()
    damaged = {"torn": entry[: len(entry) // 2],  # a process killed mid-write: no final newline
               "not json": "{not json\n",
               "no time": json.dumps({**json.loads(entry), "t": "yesterday"}) + "\n"}[damage]
    path.write_text(header + "\n" + damaged, encoding="utf-8")

    with query_cache(tmp_path, "shard") as cache:
        again = WikidataClient(sparql_server.url, fast_config, cache)
        assert again.select(QUERY)[0]["item"]["value"] == "http://www.wikidata.org/entity/Q144"
    assert (again.requests, again.cache_hits) == (1, 0)


def test_builds_sharing_a_cache_folder_take_turns_on_a_shard_file(tmp_path):
    from reasonvqa.locks import LockHeldError, exclusive_lock

    with query_cache(tmp_path, "shard"):
        with pytest.raises(LockHeldError, match="SPARQL cache"):
            with exclusive_lock(tmp_path / "shard.lock", "SPARQL cache", wait=False):
                pass


def test_user_agent_follows_wikimedia_policy(sparql_server, fast_config):
    sparql_server.script = [OK]
    WikidataClient(sparql_server.url, fast_config, cache=None).select(QUERY)

    agent = sparql_server.seen[0].headers["User-Agent"]
    assert agent == user_agent(fast_config)
    assert agent.startswith("reasonvqa-pipeline/") and f"({fast_config.contact})" in agent
    assert " SPARQLWrapper/" in agent


def test_long_queries_are_posted_short_ones_get(sparql_server, fast_config):
    sparql_server.script = [OK]
    client = WikidataClient(sparql_server.url, fast_config.model_copy(update={"post_min_chars": 200}), None)
    long_query = QUERY.replace('"02086723-n"', " ".join(f'"{n:08d}-n"' for n in range(40)))

    client.select(QUERY)
    client.select(long_query)

    assert [s.method for s in sparql_server.seen] == ["GET", "POST"]
    assert sparql_server.seen[1].query == long_query


def test_one_query_in_flight_per_client(sparql_server, fast_config):
    sparql_server.script = [Reply(200, sparql_json([]), delay_s=0.2)]
    client = WikidataClient(sparql_server.url, fast_config, cache=None)
    threads = [threading.Thread(target=client.select, args=(f"{QUERY} LIMIT {i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert client.requests == 4
    assert sparql_server.max_in_flight == 1


def test_rejects_non_http_endpoint(fast_config):
    with pytest.raises(ValueError, match="http"):
        WikidataClient("file:///etc/passwd", fast_config, cache=None)
