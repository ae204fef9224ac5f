import json

import pyarrow as pa
import pytest

from reasonvqa import schemas
from reasonvqa.stage import (AccountingError, Rejects, StageResult, read_table, run_shard, run_stream,
                             stage_stats, summarize)


def _result(shard: int, kept: list[str], bad: list[str]) -> StageResult:
    rejects = Rejects("demo", shard)
    for b in bad:
        rejects.add("bad_value", f"in.json#[{b}]", {"value": b})
    table = pa.table({"value": kept})
    return StageResult(outputs={"values": table}, rejects=rejects, rows_in=len(kept) + len(bad))


def test_shard_writes_outputs_rejects_stats_and_marker(tmp_path):
    stats = run_shard(tmp_path / "demo", 0, lambda: _result(0, ["a", "b"], ["x"]))
    assert stats["rows_in"] == 3 and stats["rows_out"] == 2 and stats["rejected"] == {"bad_value": 1}
    stage = tmp_path / "demo"
    assert read_table(stage, "values")["value"].to_pylist() == ["a", "b"]
    rejects = read_table(stage, "_rejects")
    assert rejects.to_pylist() == [{"stage": "demo", "shard": 0, "reason": "bad_value",
                                    "source": "in.json#[x]", "record": json.dumps({"value": "x"})}]
    assert (stage / "_done" / "part-00000").exists()


def test_done_shard_is_skipped(tmp_path):
    run_shard(tmp_path / "demo", 0, lambda: _result(0, ["a"], []))

    def fail():
        raise AssertionError("must not run")

    assert run_shard(tmp_path / "demo", 0, fail)["rows_out"] == 1


def test_accounting_mismatch_is_refused(tmp_path):
    broken = _result(0, ["a"], [])
    broken.rows_in = 5
    with pytest.raises(AccountingError, match="rows_in=5 != rows_out=1 \\+ rejected=0"):
        run_shard(tmp_path / "demo", 0, lambda: broken)
    assert not (tmp_path / "demo" / "_done").exists()


def test_stream_numbers_shards_and_summarizes(tmp_path):
    stage = tmp_path / "src"
    run_stream(stage, iter([_result(0, ["a"], ["b"]), _result(1, ["c", "d"], [])]))
    total = summarize(stage_stats(stage))
    assert total == {"shards": 2, "rows_in": 4, "rows_out": 3, "rejected": {"bad_value": 1}, "requests": 0}
    # a finished stream is not re-read
    assert len(run_stream(stage, iter([]))) == 2


def test_read_table_of_missing_output_gives_empty_schema_table(tmp_path):
    assert read_table(tmp_path, "objects", schemas.OBJECTS).num_rows == 0


def test_a_record_model_table_is_checked_against_its_schema_including_nested_columns(tmp_path):
    row = {"object_id": "vg:1/o1", "image_id": "vg:1", "label": "dog", "mask": {"size": [4, 4], "counts": "0g"}}
    good = schemas.from_rows([row], schemas.OBJECTS)
    run_shard(tmp_path / "sources_vg", 0,
              lambda: StageResult({"objects": good.select(list(reversed(good.column_names)))}, Rejects("vg"), rows_in=1))
    assert read_table(tmp_path / "sources_vg", "objects").schema.equals(schemas.OBJECTS)  # written in schema order

    rle64 = pa.struct([("size", pa.list_(pa.int64())), ("counts", pa.string())])
    bad = good.set_column(good.schema.get_field_index("mask"), "mask", pa.array([row["mask"]], rle64))
    with pytest.raises(ValueError, match=r"^stage 'sources_vg' shard 1 table 'objects': "
                                         r"column mask.size\[\]: expected int32, got int64$"):
        run_shard(tmp_path / "sources_vg", 1, lambda: StageResult({"objects": bad}, Rejects("vg", 1), rows_in=1))
    assert not (tmp_path / "sources_vg" / "_done" / "part-00001").exists()


def test_conform_fills_only_the_optional_question_columns():
    import pyarrow as pa

    from reasonvqa import schemas

    columns = {f.name: pa.nulls(1, f.type) for f in schemas.QUESTIONS if f.name not in schemas.OPTIONAL_COLUMNS}
    table = schemas.conform(pa.table(columns), schemas.QUESTIONS)
    assert table.schema.equals(schemas.QUESTIONS) and table["kind"].null_count == 1
    del columns["answer"]
    import pytest

    with pytest.raises(ValueError, match="answer"):
        schemas.conform(pa.table(columns), schemas.QUESTIONS)


def test_rejects_added_as_rows_and_tables_keep_their_order(tmp_path):
    rejects = Rejects("demo", 2)
    rejects.add("bad_value", "in.json#[0]", "x")
    rejects.add_table(pa.table({"reason": ["too_long", "bad_value"], "source": ["a", "b"], "record": ["{}", "{}"]}))
    rejects.add_table(pa.table({"reason": pa.array([], pa.string()), "source": pa.array([], pa.string()),
                                "record": pa.array([], pa.string())}))  # an empty table adds nothing
    with pytest.raises(ValueError, match="stage and shard"):  # the recorder names them, never the caller
        rejects.add_table(pa.table({"stage": ["other"], "shard": pa.array([9], pa.int32()), "reason": ["x"],
                                    "source": ["c"], "record": ["{}"]}))
    rejects.add("too_long", "in.json#[3]", {"n": 3})
    assert len(rejects) == 4
    assert rejects.reason_counts() == {"bad_value": 2, "too_long": 2}
    assert [r["source"] for r in rejects.rows] == ["in.json#[0]", "a", "b", "in.json#[3]"]
    table = rejects.table()
    assert table.schema == schemas.REJECTS and table["source"].num_chunks == 1
    assert table.to_pylist() == [
        {"stage": "demo", "shard": 2, "reason": "bad_value", "source": "in.json#[0]", "record": "x"},
        {"stage": "demo", "shard": 2, "reason": "too_long", "source": "a", "record": "{}"},
        {"stage": "demo", "shard": 2, "reason": "bad_value", "source": "b", "record": "{}"},
        {"stage": "demo", "shard": 2, "reason": "too_long", "source": "in.json#[3]", "record": '{"n": 3}'},
    ]  # written out by hand: the recorder's stage and shard, a text record kept as is, others as JSON
    stats = run_shard(tmp_path / "demo", 2, lambda: StageResult({}, rejects, rows_in=4))
    assert stats["rejected"] == {"bad_value": 2, "too_long": 2}
    assert read_table(tmp_path / "demo", "_rejects")["reason"].to_pylist() == ["bad_value", "too_long", "bad_value", "too_long"]


def test_no_rejects_give_an_empty_table():
    assert Rejects("demo").table().num_rows == 0 and Rejects("demo").table().schema == schemas.REJECTS
