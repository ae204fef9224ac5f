"""The Prefect settings every test process uses (tests/conftest.py's ``prefect_api``, tests/flows/conftest.py)."""

import atexit
import os
import shutil
import tempfile


def prefect_environment() -> None:
    """A private PREFECT_HOME (removed when the process exits), quiet logs, no analytics (call before Prefect
    reads its settings)."""
    if "PREFECT_HOME" not in os.environ:
        home = tempfile.mkdtemp(prefix="prefect-home-")
        atexit.register(shutil.rmtree, home, True)
        os.environ["PREFECT_HOME"] = home
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def reopen_prefect_consoles() -> None:
    """Point Prefect's console log handlers whose stream was closed at the current ``sys.stderr``.

    A handler binds the stream that was ``sys.stderr`` when Prefect set up logging; when that happened inside
    an earlier test's captured or CliRunner stream, a flow run later in the same worker fails writing its
    first log line ("I/O operation on closed file")."""
    import logging
    import sys

    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger()] + [logger for logger in logging.Logger.manager.loggerDict.values()
                                       if isinstance(logger, logging.Logger)]
    for handler in {h for logger in loggers for h in logger.handlers if isinstance(h, PrefectConsoleHandler)}:
        if getattr(handler.stream, "closed", False):
            handler.stream = sys.stderr  # not setStream: it flushes the closed stream first
            handler.console.file = sys.stderr
