"""SAM masks to COCO RLE through the changes of their column-major scan, found where the masks are."""

import numpy as np
import pytest

from reasonvqa import masks as codec

torch = pytest.importorskip("torch")

from reasonvqa.tasks.proposals.masks import column_major_changes  # noqa: E402


def test_changes_found_on_the_tensor_give_pycocotools_rles_and_areas():
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:96, 0:128]
    blobs = np.stack([(x - rng.uniform(0, 128)) ** 2 / 3 + (y - rng.uniform(0, 96)) ** 2 < rng.uniform(2, 60) ** 2
                      for _ in range(20)])
    blobs[0] = False
    blobs[1] = True
    blobs[2, :, 0] = True  # the first column: the run crosses into column 1's top
    blobs[3, 0, :] = True  # the top row: a new run at every column's top
    blobs[4, -1, :] = True  # the bottom row
    for stack in (blobs, rng.random((4, 5, 7)) < 0.5, np.ones((2, 1, 3), bool), np.zeros((1, 3, 1), bool)):
        owner, position, first = column_major_changes(torch.from_numpy(stack))
        assert np.all(np.diff(owner * stack[0].size + position) > 0)  # sorted by (owner, position), no repeats
        rles, areas = codec.coco_encode_changes(owner, position, first, *stack.shape[1:])
        assert rles == codec.coco_encode_stack(stack)
        assert areas.tolist() == stack.sum(axis=(1, 2)).tolist()
