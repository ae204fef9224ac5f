"""YAML documents read with libyaml's C parser where PyYAML was built with it (about ten times the pure-Python
parser's speed: the template bank alone took ~1 CPU s a load with it), the same safe loader's types otherwise."""

from __future__ import annotations

from typing import Any

import yaml

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, parsed by libyaml when available; raises ``yaml.YAMLError`` on a bad document."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader (SafeConstructor), C or Python
