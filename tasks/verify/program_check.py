"""First sandbox layer: an AST allow-list for LLM-written verification programs.

A program is one or more top-level functions, one of them ``def verify(sg)`` or PROVE's
``def execute_command(scene_graph)``; no imports, no classes, no dunder or private names,
attributes only from the scene-graph API and plain str/list/dict/set methods, builtins only
from ``SAFE_BUILTINS``. Passing this check proves nothing on its own: the program still runs
in a forked, resource-limited, seccomp-filtered child (``sandbox_worker``).
"""

from __future__ import annotations

import ast
import builtins

ENTRY_POINTS = ("verify", "execute_command")
MAX_SOURCE_CHARS = 20_000

SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "bool", "dict", "enumerate", "filter", "float", "int", "isinstance", "len",
    "list", "map", "max", "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple",
    "zip", "Exception", "KeyError", "ValueError", "IndexError", "TypeError", "StopIteration",
)
SAFE_BUILTINS = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES}

FORBIDDEN_NAMES = frozenset({
    "exec", "eval", "compile", "open", "globals", "locals", "vars", "getattr", "setattr", "delattr",
    "hasattr", "__import__", "breakpoint", "input", "help", "memoryview", "type", "object", "super",
    "dir", "id", "print", "classmethod", "staticmethod", "property", "bytearray", "bytes", "exit", "quit",
})

GRAPH_ATTRIBUTES = frozenset({
    # PROVE Lst. 1
    "get_entities", "get_attributes", "get_outgoing_relations", "get_incoming_relations",
    "generate_subgraph", "describe", "caption",
    # PROVE Figure 3's spellings of the same methods (scene_graph.py)
    "get_attrs", "get_incoming_rels", "subgraph",
    # read-only networkx views and queries
    "nodes", "edges", "successors", "predecessors", "neighbors", "has_node", "has_edge",
    "in_degree", "out_degree", "degree", "number_of_nodes", "number_of_edges",
})
DATA_ATTRIBUTES = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "split", "rsplit", "join", "startswith", "endswith",
    "replace", "title", "capitalize", "find", "count", "isdigit", "isalpha", "isnumeric", "splitlines",
    "append", "extend", "insert", "pop", "remove", "index", "sort", "reverse", "copy", "clear",
    "get", "items", "keys", "values", "update", "setdefault",
    "add", "discard", "union", "intersection", "difference", "issubset", "issuperset",
})
ALLOWED_ATTRIBUTES = GRAPH_ATTRIBUTES | DATA_ATTRIBUTES

ALLOWED_NODES = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign,
    ast.For, ast.While, ast.If, ast.Break, ast.Continue, ast.Pass, ast.Expr, ast.Try, ast.ExceptHandler,
    ast.Raise, ast.Assert, ast.Delete, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.keyword,
    ast.IfExp, ast.Lambda, ast.Dict, ast.Set, ast.List, ast.Tuple, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp, ast.comprehension, ast.Name, ast.Attribute, ast.Subscript, ast.Slice, ast.Starred,
    ast.Constant, ast.JoinedStr, ast.FormattedValue, ast.expr_context, ast.boolop, ast.operator,
    ast.unaryop, ast.cmpop,
)


def _concrete(classes: tuple[type, ...]) -> frozenset[type]:
    """The classes and all their subclasses (``ast.operator`` -> ``ast.Add``, ...): a set for O(1) checks."""
    found: set[type] = set()
    stack = list(classes)
    while stack:
        cls = stack.pop()
        if cls not in found:
            found.add(cls)
            stack.extend(cls.__subclasses__())
    return frozenset(found)


ALLOWED_NODE_TYPES = _concrete(ALLOWED_NODES)


class ProgramRejected(ValueError):
    """A program the allow-list refuses; ``reason`` is a short machine-readable code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _is_private(name: str) -> bool:
    return name.startswith("_")


def check_program(source: str) -> str:
    """Return the entry point's name, or raise ``ProgramRejected`` with the first violation."""
    return parse_program(source)[0]


def parse_program(source: str) -> tuple[str, ast.Module]:
    """The entry point's name and the checked syntax tree (compile the tree, not the source, to parse once);
    raises ``ProgramRejected`` with the first violation."""
    if not isinstance(source, str) or not source.strip():
        raise ProgramRejected("empty_program", "no source text")
    if len(source) > MAX_SOURCE_CHARS:
        raise ProgramRejected("program_too_long", f"{len(source)} characters > {MAX_SOURCE_CHARS}")
    try:
        tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ProgramRejected("syntax_error", str(exc).splitlines()[0][:200]) from None
    entries = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            if stmt.name in ENTRY_POINTS:
                entries.append(stmt)
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):  # a docstring
            raise ProgramRejected("top_level_statement", f"line {stmt.lineno}: only function definitions")
    if len(entries) != 1:
        raise ProgramRejected("no_entry_point", f"need exactly one of def {' / def '.join(ENTRY_POINTS)}")
    entry = entries[0]
    params = entry.args
    if len(params.args) != 1 or params.vararg or params.kwarg or params.kwonlyargs or params.posonlyargs:
        raise ProgramRejected("bad_signature", f"{entry.name} takes exactly one argument (the scene graph)")
    for node in ast.walk(tree):
        kind = type(node)
        if kind not in ALLOWED_NODE_TYPES:
            raise ProgramRejected("forbidden_syntax", f"line {getattr(node, 'lineno', 0)}: {kind.__name__}")
        if isinstance(node, ast.Name):
            if _is_private(node.id) or node.id in FORBIDDEN_NAMES:
                raise ProgramRejected("forbidden_name", f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute):
            if node.attr not in ALLOWED_ATTRIBUTES:
                reason = "dunder_attribute" if _is_private(node.attr) else "forbidden_attribute"
                raise ProgramRejected(reason, f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str) and _looks_like_dunder(node.value):
                raise ProgramRejected("dunder_string", f"line {node.lineno}: string names a dunder")
        elif isinstance(node, ast.FunctionDef):
            if node.decorator_list or _is_private(node.name):
                raise ProgramRejected("forbidden_syntax",
                                      f"line {node.lineno}: decorated or private function {node.name!r}")
        elif isinstance(node, ast.arg):
            if _is_private(node.arg):
                raise ProgramRejected("forbidden_name", f"line {node.lineno}: {node.arg}")
        elif isinstance(node, ast.ExceptHandler):
            if node.name and _is_private(node.name):
                raise ProgramRejected("forbidden_name", f"line {node.lineno}: {node.name}")
    return entry.name, tree


def _looks_like_dunder(text: str) -> bool:
    """A string such as ``"__class__"`` that only a reflective call could use."""
    start = text.find("__")
    return start >= 0 and text.find("__", start + 2) > start + 2
