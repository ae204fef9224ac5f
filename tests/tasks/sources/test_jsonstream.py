from reasonvqa.tasks.sources.jsonstream import StreamFailure, iter_json_array

from tests.tasks.sources.conftest import write_text


def _read(tmp_path, text: str, name: str = "objects.json"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return list(iter_json_array(path))


def test_records_in_order_with_floats_not_decimals(tmp_path):
    items = _read(tmp_path, '[{"image_id": 1, "x": 1.5}, {"image_id": 2}]')
    assert items == [(0, {"image_id": 1, "x": 1.5}), (1, {"image_id": 2})]
    assert type(items[0][1]["x"]) is float


def test_truncated_file_keeps_records_read_and_names_the_place(tmp_path):
    text = '[{"image_id": 1}, {"image_id": 2}, {"image_id": 3, "objects": [{"x": '
    items = _read(tmp_path, text)
    assert items[:2] == [(0, {"image_id": 1}), (1, {"image_id": 2})]
    failure = items[2]
    assert isinstance(failure, StreamFailure) and len(items) == 3
    assert failure.reason == "json_truncated"
    assert failure.index == 2
    assert failure.location == f"objects.json#[2]@bytes[0:{len(text)}]"


def test_syntax_error_is_a_parse_error_after_the_good_records(tmp_path):
    items = _read(tmp_path, '[{"a": 1}, {"a": 2,, "b": 3}, {"a": 4}]')
    assert items[0] == (0, {"a": 1})
    assert items[1].reason == "json_parse_error" and items[1].index == 1
    assert len(items) == 2


def test_trailing_garbage_after_a_complete_array(tmp_path):
    items = _read(tmp_path, '[{"a": 1}] junk')
    assert items[0] == (0, {"a": 1})
    assert items[1].reason == "json_parse_error" and items[1].index == 1


def test_not_an_array_and_empty_file(tmp_path):
    (failure,) = _read(tmp_path, '  {"image_id": 1}')
    assert failure.reason == "json_not_array" and failure.index == 0
    (empty,) = _read(tmp_path, "")
    assert empty.reason == "json_not_array" and "empty file" in empty.message


def test_utf8_bom_and_leading_whitespace_are_accepted(tmp_path):
    items = _read(tmp_path, b"\xef\xbb\xbf \n [{\"name\": \"caf\xc3\xa9\"}]")
    assert items == [(0, {"name": "café"})]


def test_invalid_utf8_is_a_parse_error_not_a_crash(tmp_path):
    items = _read(tmp_path, b'[{"a": 1}, {"a": "\xff\xfe"}]')
    assert items[0] == (0, {"a": 1})
    assert items[1].reason == "json_parse_error"


def test_byte_range_points_into_the_chunk_that_failed(tmp_path):
    good = ", ".join('{"image_id": %d, "pad": "%s"}' % (i, "x" * 200) for i in range(2000))
    text = "[" + good + ', {"image_id": 99999, "pad": '
    path = write_text(tmp_path, "big.json", text)
    items = list(iter_json_array(path))
    failure = items[-1]
    assert len(items) == 2001 and failure.index == 2000
    assert failure.byte_end == len(text) and 0 < failure.byte_start < failure.byte_end
    assert failure.byte_end - failure.byte_start <= 1 << 16
