import gc

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.gc_pause import gc_paused
from reasonvqa.tasks.sources.columns import ColumnBuffer


def test_rows_flushed_in_batches_come_back_sorted_with_constants_and_nulls():
    buffer = ColumnBuffer(schemas.OBJECTS, ("object_id", "label", "names", "x"), [("_pos", pa.int64()), ("_oid", pa.int64())],
                          {"origin": "annotation:vg"}, batch_rows=2)
    buffer.add((1, 9, "vg:2/o9", "cup", ["cup"], 1.5))
    buffer.add_many([(0, 7, "vg:1/o7", "dog", ["dog", "puppy"], 3), (1, 3, "vg:2/o3", "mug", ["mug"], 0.0)])
    buffer.add((0, 2, "vg:1/o2", "cat", [], 4.0))
    assert len(buffer) == 4 and len(buffer.batches) >= 1
    table = buffer.table()
    assert table.schema == schemas.OBJECTS
    assert table["object_id"].to_pylist() == ["vg:1/o2", "vg:1/o7", "vg:2/o3", "vg:2/o9"]
    assert table["names"].to_pylist() == [[], ["dog", "puppy"], ["mug"], ["cup"]]
    assert table["x"].to_pylist() == [4.0, 3.0, 0.0, 1.5]
    assert set(table["origin"].to_pylist()) == {"annotation:vg"} and table["synset"].null_count == 4


def test_empty_buffer_gives_an_empty_table_of_the_schema():
    table = ColumnBuffer(schemas.ATTRIBUTES, ("object_id",), [("_pos", pa.int64())]).table()
    assert table.num_rows == 0 and table.schema == schemas.ATTRIBUTES


def test_gc_paused_restores_the_previous_state():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
