"""The Prefect settings every test process uses (tests/conftest.py's ``prefect_api``, tests/flows/conftest.py)."""

import os
import tempfile


def prefect_environment() -> None:
    """A private PREFECT_HOME, quiet logs, no analytics (call before Prefect reads its settings)."""
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="prefect-home-"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
