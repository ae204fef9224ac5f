"""Error kinds the command line turns into one line and an exit status.

Exit 2: the user asked for something that cannot be done (a bad flag, config or path).
Exit 1: the data or a service failed (a corrupt source file, an endpoint that never answered).
Anything else is a bug: one line too, and the full traceback with ``reasonvqa --debug``.
"""

from __future__ import annotations

USAGE_EXIT = 2
DATA_EXIT = 1


class UsageError(ValueError):
    """A request that cannot be carried out as given (exit 2)."""


class DataError(RuntimeError):
    """Input data or a service that failed in a way the build cannot account for record by record (exit 1)."""


class ReleaseExistsError(FileExistsError):
    """The target release version exists with different content and overwriting was not asked for."""


def one_line(exc: BaseException | str, limit: int = 600) -> str:
    """``exc`` (an exception or a message) as a single line (newlines folded), at most ``limit`` characters."""
    text = " ".join(str(exc).split()) or (type(exc).__name__ if isinstance(exc, BaseException) else "")
    return text if len(text) <= limit else text[: limit - 3] + "..."
