"""The predictions validator: every line that is not scored is counted and named (file:line, question id)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reasonvqa import masks
from reasonvqa.errors import UsageError
from reasonvqa.tasks.evaluate.predictions import read_predictions

SIZES = {"q1": (4, 10), "q2": (4, 10), "q3": (4, 10), "q4": (4, 10), "q5": None, "q6": (4, 10)}


def test_every_bad_line_is_named(tmp_path):
    mask = np.zeros((4, 10), np.uint8)
    mask[:, :3] = 1
    compressed = masks.coco_encode(mask)
    uncompressed = {"size": [4, 10], "counts": [0, 12, 28]}  # the same mask as run lengths
    lines = [
        json.dumps({"question_id": "q1", "answer": "a", "masks": [compressed, [1, 1, 2, 2]]}),  # 1 valid: RLE + box
        json.dumps({"question_id": "q2", "answer": "b", "choice": 2, "masks": [uncompressed]}),  # 2 valid
        "{not json",                                                                             # 3 bad_json
        json.dumps(["q3", "c"]),                                                                 # 4 not_an_object
        json.dumps({"answer": "c"}),                                                             # 5 no_question_id
        json.dumps({"question_id": "q3", "answer": 3}),                                         # 6 bad_answer
        json.dumps({"question_id": "q3", "answer": "c", "choice": [1]}),                        # 7 bad_choice
        json.dumps({"question_id": "q3", "answer": "c", "masks": [{"size": [4, 10], "counts": "zz"}]}),  # 8 malformed
        json.dumps({"question_id": "q4", "answer": "d", "masks": [{"size": [5, 10], "counts": [50]}]}),  # 9 wrong size
        json.dumps({"question_id": "q5", "answer": "e", "masks": [[0, 0, 2, 2]]}),  # 10 a box without the image size
        json.dumps({"question_id": "q6", "answer": "f", "masks": [[0, 0, -1, 2]]}),  # 11 a negative width
        json.dumps({"question_id": "zz", "answer": "g"}),                                       # 12 unknown_id
        json.dumps({"question_id": "q1", "answer": "again"}),                                   # 13 duplicate_id
        "",                                                                                      # 14 blank: skipped
    ]
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    read = read_predictions(path, SIZES)
    assert sorted(read.by_id) == ["q1", "q2"]
    assert read.by_id["q1"].answer == "a" and len(read.by_id["q1"].masks) == 2
    assert read.by_id["q2"].choice == 2 and read.by_id["q2"].masks[0]["counts"] == compressed["counts"].encode()
    named = [(p.kind, p.where.rsplit(":", 1)[-1] if p.kind != "missing_id" else p.where, p.question_id)
             for p in read.problems]
    assert named == [
        ("bad_json", "3", None), ("not_an_object", "4", None), ("no_question_id", "5", None),
        ("bad_answer", "6", "q3"), ("bad_choice", "7", "q3"), ("malformed_mask", "8", "q3"),
        ("malformed_mask", "9", "q4"), ("malformed_mask", "10", "q5"), ("malformed_mask", "11", "q6"),
        ("unknown_id", "12", "zz"), ("duplicate_id", "13", "q1"),
        ("missing_id", str(path), "q3"), ("missing_id", str(path), "q4"), ("missing_id", str(path), "q5"),
        ("missing_id", str(path), "q6")]
    assert all(p.where.startswith(str(path)) for p in read.problems)
    assert "first predicted at line 1" in read.problems[10].detail
    assert "[5, 10]" in read.problems[6].detail
    assert read.counts() == {"bad_json": 1, "not_an_object": 1, "no_question_id": 1, "bad_answer": 1, "bad_choice": 1,
                             "malformed_mask": 4, "unknown_id": 1, "duplicate_id": 1, "missing_id": 4}


def test_unreadable_file_is_one_usage_error(tmp_path):
    with pytest.raises(UsageError, match="nope.jsonl"):
        read_predictions(tmp_path / "nope.jsonl", SIZES)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match="binary.jsonl"):
        read_predictions(binary, SIZES)
