"""Suite-wide test setup and fixtures."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.torchvision_cpu import prepare

# Before anything imports torchvision, transformers or segment_anything (see tests/torchvision_cpu.py).
prepare()


@pytest.fixture
def hide_module(monkeypatch):
    """``hide_module(name)``: for this test, ``import name`` (and its submodules) fails as if the package
    were not installed, and fsspec forgets a file system class it already imported from it."""
    def hide(name: str) -> None:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)  # the import system raises ModuleNotFoundError on None
        fsspec_registry = importlib.import_module("fsspec.registry")
        for protocol, cls in list(fsspec_registry._registry.items()):
            if cls.__module__ == name or cls.__module__.startswith(name + "."):
                monkeypatch.delitem(fsspec_registry._registry, protocol)
        with pytest.raises(ImportError):
            importlib.import_module(name)

    return hide
