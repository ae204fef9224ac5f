import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.table_check import SchemaMismatch, check_table, schema_mismatches, type_mismatches


def test_nested_differences_are_named_by_path():
    want = pa.list_(pa.struct([("mask", schemas.RLE), ("score", pa.float32())]))
    got = pa.list_(pa.struct([("mask", pa.struct([("size", pa.list_(pa.int64())), ("counts", pa.string())])),
                              ("extra", pa.int8())]))
    assert type_mismatches(want, got, "regions") == [
        "regions[].extra: not in the schema",
        "regions[].mask.size[]: expected int32, got int64",
        "regions[].score: missing",
    ]


def test_struct_fields_in_another_order_are_reported():
    want = pa.struct([("a", pa.int8()), ("b", pa.int8())])
    got = pa.struct([("b", pa.int8()), ("a", pa.int8())])
    assert type_mismatches(want, got, "s") == ["s: fields in order ['b', 'a'], expected ['a', 'b']"]


def test_list_kinds_are_not_interchangeable():
    assert type_mismatches(pa.list_(pa.string()), pa.large_list(pa.string()), "names") == [
        "names: expected list<item: string>, got large_list<item: string>"]


def test_columns_missing_or_undeclared():
    table = pa.table({"stage": ["s"], "shard": pa.array([1], pa.int64()), "note": ["x"]})
    assert schema_mismatches(schemas.REJECTS, table.schema) == [
        "reason: missing", "source: missing", "record: missing", "note: not in the schema",
        "shard: expected int32, got int64",
    ]


def test_a_matching_table_comes_back_in_schema_order():
    rows = [{"region_id": "sa1b:1/g1", "image_id": "sa1b:1", "mask": {"size": [2, 2], "counts": "04"},
             "attributes": ["a"], "center_3d": [1.0, 2.0, 3.0]}]
    table = schemas.from_rows(rows, schemas.REGIONS)
    shuffled = table.select(list(reversed(table.column_names)))
    assert check_table(shuffled, schemas.REGIONS, "here").schema.equals(schemas.REGIONS)
    with pytest.raises(SchemaMismatch, match=r"^here: column area: missing$"):
        check_table(table.drop_columns(["area"]), schemas.REGIONS, "here")
