import re

import pytest

from reasonvqa.jsonstream import JsonSourceError, iter_json_array

from tests.tasks.sources.conftest import write_text


def _read(tmp_path, text: str, name: str = "objects.json"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return list(iter_json_array(path))


def test_records_in_order_with_floats_not_decimals(tmp_path):
    items = _read(tmp_path, '[{"image_id": 1, "x": 1.5}, {"image_id": 2}]')
    assert items == [(0, {"image_id": 1, "x": 1.5}), (1, {"image_id": 2})]
    assert type(items[0][1]["x"]) is float


def test_a_truncated_file_is_an_error_for_the_file_naming_the_place(tmp_path):
    text = '[{"image_id": 1}, {"image_id": 2}, {"image_id": 3, "objects": [{"x": '
    path = tmp_path / "objects.json"
    path.write_text(text)
    read = []
    with pytest.raises(JsonSourceError, match=rf"objects.json: truncated: the file ends inside record \[2\] "
                                              rf"\(bytes \[0:{len(text)}\]\); records \[0:2\] were read"):
        read.extend(iter_json_array(path))
    assert read == [(0, {"image_id": 1}), (1, {"image_id": 2})]


def test_syntax_error_inside_the_array_stops_the_read_naming_record_and_bytes(tmp_path):
    # JSON cannot resynchronise: record [2] and later would be lost, so this is an error, not a reject
    path = tmp_path / "objects.json"
    path.write_text('[{"a": 1}, {"a": 2,, "b": 3}, {"a": 4}]')
    read = []
    with pytest.raises(JsonSourceError, match=r"objects.json: invalid JSON in record \[1\] within bytes \[0:39\]"):
        read.extend(iter_json_array(path))
    assert read == [(0, {"a": 1})]


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


def test_invalid_utf8_inside_the_array_is_an_error_naming_the_record(tmp_path):
    with pytest.raises(JsonSourceError, match=r"invalid JSON in record \[1\] .*invalid bytes in UTF8"):
        _read(tmp_path, b'[{"a": 1}, {"a": "\xff\xfe"}]')


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path):
    text = '[{"a": "' + "[" * 100 + '\\\\"}, {"b": "\\"' + "{" * 100 + '"}]'
    items = _read(tmp_path, text)
    assert [i for i, _ in items] == [0, 1] and items[1][1]["b"] == '"' + "{" * 100


def test_nesting_beyond_the_bound_is_an_error_before_parsing(tmp_path):
    with pytest.raises(JsonSourceError, match=r"nesting deeper than 8 levels at byte 18 \(records \[0:0\] were read\)"):
        list(iter_json_array(write_text(tmp_path, "d.json", '[{"a": 1}, ' + "[" * 20 + "]" * 20 + "]"), max_depth=8))


def test_byte_range_points_into_the_chunk_that_failed(tmp_path):
    good = ", ".join('{"image_id": %d, "pad": "%s"}' % (i, "x" * 200) for i in range(2000))
    text = "[" + good + ', {"image_id": 99999, "pad": '
    path = write_text(tmp_path, "big.json", text)
    items = []
    with pytest.raises(JsonSourceError, match=r"record \[2000\] \(bytes \[(\d+):(\d+)\]\)") as error:
        items.extend(iter_json_array(path))
    start, end = (int(v) for v in re.search(r"bytes \[(\d+):(\d+)\]", str(error.value)).groups())
    assert len(items) == 2000
    assert end == len(text) and 0 < start < end and end - start <= 1 << 16


def test_a_whole_json_document_too_large_too_deep_or_with_a_huge_number_is_one_error_naming_the_file(tmp_path):
    from reasonvqa.jsonstream import read_json_document

    graph = tmp_path / "graph.json"
    graph.write_text('{"caption": "two dogs", "tuples": [["dog", "left of", "dog"]]}')
    assert read_json_document(graph) == {"caption": "two dogs", "tuples": [["dog", "left of", "dog"]]}
    with pytest.raises(JsonSourceError, match=rf"^{graph}: 62 bytes, more than the 40 a single JSON document may have"):
        read_json_document(graph, max_bytes=40)
    graph.write_text('{"tuples": ' + "[" * 70 + "]" * 70 + "}")
    with pytest.raises(JsonSourceError, match=rf"^{graph}: nesting deeper than 64 levels at byte 74$"):
        read_json_document(graph)
    graph.write_text('{"tuples": [[' + "9" * 5000 + "]]}")
    with pytest.raises(JsonSourceError, match=rf"^{graph}: not JSON \(Exceeds the limit \(4300 digits\)"):
        read_json_document(graph)
