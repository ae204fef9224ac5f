"""Shared fixtures: a scripted SPARQL HTTP server on 127.0.0.1, and Oxigraph stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.mirror import InProcessClient, build_store
from tests.knowledge.helpers import ScriptedSparqlServer


@pytest.fixture
def sparql_server():
    server = ScriptedSparqlServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def fast_config() -> KnowledgeConfig:
    """Client settings with tiny backoff delays (the retry logic is the same)."""
    return KnowledgeConfig(backoff_base_s=0.01, backoff_max_s=0.05, max_attempts=4, timeout_s=5)


@pytest.fixture(scope="session")
def bundled_store(tmp_path_factory) -> Path:
    """The Oxigraph store of the bundled sample knowledge (built once per test session)."""
    # <work>/knowledge_mirror: where serve_mirror(entities, <work>) looks, so it reuses this build
    return build_store(KnowledgeConfig().mirror_entities, tmp_path_factory.mktemp("bundled") / "knowledge_mirror")


@pytest.fixture(scope="session")
def bundled_client(bundled_store) -> InProcessClient:
    return InProcessClient.open(bundled_store)
