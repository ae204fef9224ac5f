"""Check a stage's output tables against their declared schemas, nested types included."""

from __future__ import annotations

import pyarrow as pa

_LIST_KINDS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)


class SchemaMismatch(ValueError):
    """An output table whose columns or types differ from its declared schema."""


def type_mismatches(expected: pa.DataType, actual: pa.DataType, path: str) -> list[str]:
    """Where ``actual`` differs from ``expected``, one line per differing nested field.

    Paths name struct fields with dots and list items with ``[]``: ``regions[].mask.counts``.
    """
    if expected.equals(actual):
        return []
    for is_kind in _LIST_KINDS:
        if is_kind(expected) and is_kind(actual) and getattr(expected, "list_size", None) == getattr(actual, "list_size", None):
            return type_mismatches(expected.value_type, actual.value_type, f"{path}[]")
    if pa.types.is_struct(expected) and pa.types.is_struct(actual):
        want = {expected.field(i).name: expected.field(i).type for i in range(expected.num_fields)}
        got = {actual.field(i).name: actual.field(i).type for i in range(actual.num_fields)}
        problems = [f"{path}.{name}: missing" for name in want if name not in got]
        problems += [f"{path}.{name}: not in the schema" for name in got if name not in want]
        for name in want.keys() & got.keys():
            problems += type_mismatches(want[name], got[name], f"{path}.{name}")
        if not problems:  # same fields, other order
            problems = [f"{path}: fields in order {list(got)}, expected {list(want)}"]
        return sorted(problems)
    return [f"{path}: expected {expected}, got {actual}"]


def schema_mismatches(expected: pa.Schema, actual: pa.Schema) -> list[str]:
    """Missing columns, undeclared columns and type differences of ``actual`` against ``expected``."""
    problems = [f"{name}: missing" for name in expected.names if name not in actual.names]
    problems += [f"{name}: not in the schema" for name in actual.names if name not in expected.names]
    for field in expected:
        if field.name in actual.names:
            problems += type_mismatches(field.type, actual.field(field.name).type, field.name)
    return problems


def check_table(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """``table`` with its columns in schema order, or ``SchemaMismatch`` (one line, starting with ``where``)."""
    problems = schema_mismatches(schema, table.schema)
    if problems:
        raise SchemaMismatch(f"{where}: " + "; ".join(f"column {p}" for p in problems))
    return table.select(schema.names)
