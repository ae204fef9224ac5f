"""Virtual environments for real third-party tools (datumaro, Label Studio): see tests/tool_cache.py."""

from tests.tool_cache import DATUMARO, LABEL_STUDIO, tool_python

__all__ = ["DATUMARO", "LABEL_STUDIO", "tool_python"]
