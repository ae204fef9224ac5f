"""Every flow test runs against the session's temporary Prefect API (``prefect_api`` in tests/conftest.py)."""

import pytest

from tests.prefect_harness import prefect_environment

prefect_environment()  # at collection, before the flow modules import Prefect


@pytest.fixture(scope="session", autouse=True)
def _flows_use_the_prefect_api(prefect_api):
    yield
