"""The one loopback check (reasonvqa/loopback.py) that the runners and the rate limit share."""

import pytest

from reasonvqa.loopback import is_loopback, is_loopback_host


@pytest.mark.parametrize("url, loopback", [
    ("http://127.0.0.1:7878/query", True),
    ("http://127.0.0.2:7878/query", True),  # all of 127.0.0.0/8, not only 127.0.0.1
    ("http://127.5.0.1/q", True),
    ("http://localhost:1/q", True),
    ("http://LOCALHOST./q", True),
    ("http://mirror.localhost:7878/q", True),  # RFC 6761
    ("http://[::1]:80/q", True),
    ("http://[::ffff:127.0.0.1]:80/q", True),  # IPv4-mapped loopback
    ("https://query.wikidata.org/sparql", False),
    ("http://10.0.0.5/q", False),
    ("http://128.0.0.1/q", False),
    ("http://[::2]/q", False),
    ("http://localhost.example.org/q", False),
    ("http://0.0.0.0:7878/q", False),
    ("file:///etc/hosts", False),  # no host
])
def test_loopback_urls(url, loopback):
    assert is_loopback(url) is loopback


def test_loopback_hosts_bare_and_bracketed():
    assert [is_loopback_host(h) for h in ("127.0.0.1", "::1", "[::1]", " localhost ", "fe80::1%eth0", "", "example")] \
        == [True, True, True, True, False, False, False]
