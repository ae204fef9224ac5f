"""The grounded stage's output on 50 real Visual Genome images (the ``vg50`` fixture of conftest.py), pinned: the
per-image geometry is computed for every pair at once (numpy) and the wording once per distinct label, and the rows,
their order, the rejects and their reasons must stay what the per-pair code wrote. The digests were taken from
the code before that change (commit fa0cd4c); ``template_version`` is left out (a content hash of the rule modules,
which changes with any edit of them)."""

from __future__ import annotations

import hashlib
import itertools
import json

import numpy as np
import pyarrow as pa
import pytest

from reasonvqa.tasks.questions.grounded import spatial_answer
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.hallucination import is_absent
from reasonvqa.tasks.questions.regions import Region, box_iou, iou_matrix, side_masks

# sha256 of the rows as sorted-key JSON lines (see ``digest``): the per-pair code of fa0cd4c wrote the same rows as
# the vectorized one; re-pinned when absence claims moved to label-pair co-occurrence (absence.py, cooccurrence.py),
# and when the position form's absent objects were drawn over the shard (position_draw.py: 18 of the 26
# identification hallucination rows name another absent object; every other row and every reject as before)
QUESTIONS_SHA256 = "b97f1470b11920f1718cd64d7defef5bdb448a018eae9296ac9359a16317ae64"
REJECTS_SHA256 = "5080ff52166e62d886d42e5ebe42b301bf95a766a0bcd8c20fa245809e64daa4"
COUNTS = {"rows_in": 10093, "rows_out": 6840, "hallucination": 3130}


def digest(table: pa.Table) -> str:
    return hashlib.sha256("".join(json.dumps(row, sort_keys=True) + "\n" for row in table.to_pylist()).encode()).hexdigest()


def test_grounded_rows_and_rejects_are_those_of_the_per_pair_code(vg50):
    result = vg50[0]
    assert digest(result.outputs["questions"].drop_columns(["template_version"])) == QUESTIONS_SHA256
    assert digest(result.rejects.table()) == REJECTS_SHA256
    assert {"rows_in": result.rows_in, "rows_out": result.rows_out, "hallucination": result.extra["hallucination"]} == COUNTS


def _box(i: int, x: float, y: float, w: float, h: float) -> Region:
    return Region(f"vg:1/g{i}", "vg:1", "cup", x, y, w, h, w * h, None)


# touching edges, a box inside another, equal boxes, a zero-area box, thirds that do not add up in binary
BOXES = [_box(0, 0.0, 0.0, 10.0, 10.0), _box(1, 10.0, 0.0, 5.0, 10.0), _box(2, 2.0, 2.0, 3.0, 3.0),
         _box(3, 0.0, 0.0, 10.0, 10.0), _box(4, 20.0, 30.0, 0.0, 4.0), _box(5, 0.1, 0.2, 1 / 3, 2 / 3),
         _box(6, 0.3, 0.1, 0.7, 0.2), _box(7, 13.0, 12.0, 4.0, 1.0)]


def test_iou_matrix_equals_box_iou_of_each_pair():
    matrix = iou_matrix(BOXES)
    assert matrix[0, 3] == 1.0 and matrix[0, 1] == 0.0 and matrix[0, 2] == 9 / 100 and matrix[4, 4] == 0.0
    for (i, a), (j, b) in itertools.product(enumerate(BOXES), repeat=2):
        assert matrix[i, j] == box_iou(a, b)


def test_iou_matrix_of_a_box_with_no_finite_side_is_box_iou_too():
    boxes = [*BOXES[:2], _box(9, float("nan"), 0.0, 1.0, 1.0)]
    assert iou_matrix(boxes).tolist() == [[box_iou(a, b) for b in boxes] for a in boxes]


def test_side_masks_name_the_side_spatial_answer_names():
    config = GroundedConfig(spatial_margin=0.1)
    masks = side_masks(BOXES, config.spatial_margin * 10.0, config.spatial_margin * 20.0)
    assert masks["left"][0, 7] and not masks["left"][0, 1]  # 10 + 1 <= 13; 10 + 1 > 10 (touching is no gap)
    for (i, a), (j, b) in itertools.product(enumerate(BOXES), repeat=2):
        for axis, sides in (("horizontal", ("left", "right")), ("vertical", ("above", "below"))):
            answer = spatial_answer(a, b, axis, 10.0, 20.0, config)
            assert [side for side in sides if masks[side][i, j]] == ([answer] if answer else [])
    assert np.array_equal(masks["left"], masks["right"].T)


@pytest.mark.parametrize(("label", "present", "absent"), [
    ("car", {"car door", "tree"}, False),  # contained as a whole word
    ("car door", {"car"}, False),  # contains a present label
    ("cars", {"red car"}, False),  # its singular is contained
    ("car", {"carpet", "scar"}, True),  # inside other words only
    ("teddy bear", {"bear"}, False),
    ("bear", {"teddy bears"}, False),  # the plural is a whole word of it
    ("cup", set(), True),
    ("hot dog", {"dog house", "hot"}, False),
])
def test_is_absent_by_whole_words_both_ways(label, present, absent):
    assert is_absent(label, present) is absent
