import json
import math

import pytest

from reasonvqa import schemas
from reasonvqa.tasks.sources.region_columns import RegionColumns, json_objects


def python_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize("value", [0.0, -0.0, 0.1, 1e-7, 1.5e-5, 123456789.125, 1e16, 1e22, 2.5e-300, 629.9375, 7, -3])
def test_vectorized_encoding_matches_the_python_encoder(value):
    objects = [{"point_coords": [[value, 1.5]], "crop_box": [value, 0.0, 2.0, 3.0], "name": 'a"b\\c é'}] * 3
    assert json_objects(objects) == [python_json(o) for o in objects]


@pytest.mark.parametrize("objects", [
    [{"a": 1}, {"b": 2}],  # different keys
    [{"f": math.nan}],  # NaN needs the Python encoder's token
    [{"n": None}],
    [{"d": {"x": 1}}],
    [{"t": True}],
    [{"l": [[1.0], None]}],
])
def test_other_objects_take_the_python_encoder(objects):
    assert json_objects(objects) == [python_json(o) for o in objects]


def test_columns_extend_and_add_give_one_regions_table():
    columns = RegionColumns()
    columns.extend(2, region_id=["i/g1", "i/g2"], image_id="i", x=[0.0, 1.0], y=[0.0, 1.0], w=[2.0, 2.0],
                   h=[3.0, 3.0], area=[5.0, 6.0], origin="annotation:t", predicted_iou=[math.nan, 0.5],
                   masks=([4, 4], [6, 6], ["abc", "def"]), extra=[{"k": [1.0]}, None])
    columns.add(region_id="i/g3", image_id="i", label="car", box=(1, 2, 3, 4), area=12.0, origin="annotation:t",
                extra="{\"raw\":1}", attributes=["parked"])
    table = columns.table()
    assert table.schema == schemas.REGIONS
    rows = table.to_pylist()
    assert [r["mask"] for r in rows] == [{"size": [4, 6], "counts": "abc"}, {"size": [4, 6], "counts": "def"}, None]
    assert [r["predicted_iou"] for r in rows] == [None, 0.5, None]
    assert [r["extra"] for r in rows] == ['{"k":[1.0]}', None, '{"raw":1}']
    assert rows[2]["attributes"] == ["parked"] and rows[2]["label"] == "car"
    with pytest.raises(TypeError, match="unknown region columns"):
        columns.extend(1, colour=["red"])


def test_field_columns_whose_sampled_type_is_wrong_still_encode_every_row():
    # 200 rows of integer lists, then one float list and one list of lists: the sample sees only integers
    fields = {"crop_box": [[1, 2, 3, 4]] * 200 + [[1.5, 2.0, 3.0, 4.0], [[1.0]]], "tag": ["a"] * 202}
    columns = RegionColumns()
    columns.extend(202, region_id=[f"i/g{k}" for k in range(202)], image_id="i", x=0.0, y=0.0, w=1.0, h=1.0,
                   area=1.0, origin="annotation:t", extra_fields=fields)
    texts = columns.table().column("extra").to_pylist()
    assert [json.loads(t) for t in texts] == [{"crop_box": c, "tag": "a"} for c in fields["crop_box"]]


def _fill(columns: RegionColumns, as_array) -> None:
    columns.extend(2, region_id=["i/g1", "i/g2"], image_id="i", x=as_array([0.0, 1.5]), y=as_array([0.0, 1.0]),
                   w=as_array([2.0, 2.0]), h=as_array([3.0, 3.0]), area=as_array([5.0, 6.0]), origin="annotation:t",
                   predicted_iou=as_array([math.nan, 0.9]), masks=([4, 4], [6, 6], ["abc", "def"]),
                   extra_fields={"crop_box": [[0.0, 1.0], [2.0, 3.0]]})
    columns.extend(1, region_id=["i/g3"], image_id="i", x=as_array([7.0]), y=as_array([7.0]), w=as_array([1.0]),
                   h=as_array([1.0]), area=as_array([1.0]), origin="annotation:t", predicted_iou=as_array([0.25]),
                   masks=([4], [6], ["ghi"]), extra_fields={"crop_box": [[4.0, 5.0]]})


def test_numpy_columns_give_the_table_of_the_same_lists():
    import numpy as np

    from_arrays, from_lists = RegionColumns(), RegionColumns()
    _fill(from_arrays, lambda v: np.array(v, dtype=np.float64))
    _fill(from_lists, list)
    table = from_arrays.table()
    assert table.equals(from_lists.table())
    assert table.column("predicted_iou").to_pylist() == [None, pytest.approx(0.9), 0.25]
    assert table.column("extra").to_pylist() == ['{"crop_box":[0.0,1.0]}', '{"crop_box":[2.0,3.0]}', '{"crop_box":[4.0,5.0]}']
    assert table.column("mask").to_pylist()[2] == {"size": [4, 6], "counts": "ghi"}


def test_numpy_columns_mixed_with_rows_keep_the_order():
    import numpy as np

    columns = RegionColumns()
    _fill(columns, lambda v: np.array(v, dtype=np.float64))
    columns.add(region_id="i/g4", image_id="i", label="car", box=(1, 2, 3, 4), area=12.0, origin="annotation:t")
    _fill(columns, lambda v: np.array(v, dtype=np.float64))
    rows = columns.table().to_pylist()
    assert [r["x"] for r in rows] == [0.0, 1.5, 7.0, 1.0, 0.0, 1.5, 7.0]
    assert [r["mask"] is None for r in rows] == [False] * 3 + [True] + [False] * 3
    assert rows[3]["extra"] is None and rows[4]["extra"] == '{"crop_box":[0.0,1.0]}'
    with pytest.raises(TypeError, match="cannot be an array"):
        columns.extend(1, region_id=["i/g9"], x=np.zeros(2))


def test_a_float_after_a_sample_of_integers_is_not_truncated():
    # Arrow converts 2.5 to a sampled int64 type as 2 without an error: the sample type must not be trusted
    fields = {"crop_box": [[1, 2, 3, 4]] * 200 + [[2.5, 2, 3, 4]]}
    columns = RegionColumns()
    columns.extend(201, region_id=[f"i/g{k}" for k in range(201)], image_id="i", x=0.0, y=0.0, w=1.0, h=1.0,
                   area=1.0, origin="annotation:t", extra_fields=fields)
    texts = columns.table().column("extra").to_pylist()
    assert json.loads(texts[-1]) == {"crop_box": [2.5, 2, 3, 4]}
    assert [json.loads(t) for t in texts] == [{"crop_box": c} for c in fields["crop_box"]]
