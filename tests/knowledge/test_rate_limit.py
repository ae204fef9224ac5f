import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.rate_limit import create_command, needs_rate_limit, query_throttle, rate_limit_name


def test_limit_is_named_for_the_endpoint_host():
    assert rate_limit_name("https://query.wikidata.org/sparql") == "sparql-query-wikidata-org"
    assert create_command("https://query.wikidata.org/sparql") == (
        "prefect gcl create sparql-query-wikidata-org --limit 1 --slot-decay-per-second 1")


@pytest.mark.parametrize("endpoint, mode, needed", [
    (None, "auto", False),  # the embedded mirror
    (None, "required", False),
    ("https://query.wikidata.org/sparql", "auto", True),
    ("https://query.wikidata.org/sparql", "off", False),
    ("http://127.0.0.1:7878/query", "auto", False),
    ("http://localhost:7878/query", "auto", False),
    ("http://127.0.0.2:7878/query", "auto", False),  # a mirror on another loopback address
    ("http://[::1]:7878/query", "auto", False),
    ("http://10.0.0.5:7878/query", "auto", True),
    ("http://127.0.0.1:7878/query", "required", True),
])
def test_which_endpoints_need_the_limit(endpoint, mode, needed):
    config = KnowledgeConfig(endpoint=endpoint, rate_limit=mode)
    assert needs_rate_limit(config) is needed
    assert (query_throttle(config) is not None) is needed
