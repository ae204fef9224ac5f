"""Rules the suite keeps, checked on its source: every test checks something, tests and benchmarks stay apart."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKING_CALLS = {"raises", "warns", "fail", "deprecated_call"}  # pytest.raises(...) and friends


def _checks_directly(function: ast.AST) -> bool:
    """An ``assert``, an expected exception or warning, or a call of an ``assert...`` function (numpy.testing)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in CHECKING_CALLS or name.lower().startswith(("assert", "_assert")):
                return True
    return False


def hollow_tests(source: str) -> list[str]:
    """Test functions of a module that check nothing: no assertion and no expected exception in their body,
    nor in a function of the same module they call (followed to any depth)."""
    tree = ast.parse(source)
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    checks: dict[str, bool] = {}

    def checking(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name not in checks:
            function = functions[name]
            called = {node.func.id for node in ast.walk(function)
                      if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions}
            checks[name] = _checks_directly(function) or any(checking(c, seen | {name}) for c in called - seen - {name})
        return checks[name]

    return [name for name in functions if name.startswith("test") and not checking(name)]


def test_every_test_function_asserts_or_expects_an_exception():
    hollow = [f"{path.relative_to(ROOT)}::{name}" for path in sorted((ROOT / "tests").rglob("test_*.py"))
              for name in hollow_tests(path.read_text(encoding="utf-8"))]
    assert hollow == [], "tests that check nothing (add an assertion or pytest.raises):\n" + "\n".join(hollow)


def test_the_hollow_test_check_finds_tests_that_check_nothing():
    source = '''
import pytest

def helper(x):
    assert x

def relay(x):
    helper(x)

def test_hollow():
    print(1)

def test_calls_a_checking_helper_through_another():
    relay(1)

def test_recursion_without_checks():
    test_recursion_without_checks()

def test_expected_error():
    with pytest.raises(ValueError):
        int("x")

async def test_async_hollow():
    pass

def test_numpy_check():
    np.testing.assert_array_equal([1], [1])
'''
    assert hollow_tests(source) == ["test_hollow", "test_recursion_without_checks", "test_async_hollow"]


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_tests_and_benchmarks_do_not_import_each_other():
    crossing = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("*.py")) if "benchmarks" in _imported_roots(p)]
    crossing += [str(p.relative_to(ROOT)) for p in sorted((ROOT / "benchmarks").rglob("*.py")) if "tests" in _imported_roots(p)]
    assert crossing == [], f"shared code belongs in a module both import (see benchmarks/README.md): {crossing}"
