"""Post-NMS filters: boxes over half the image, then classes with fewer than 3 boxes."""

import numpy as np

from reasonvqa.tasks.proposals.filters import BOX_TOO_LARGE, CLASS_TOO_FEW_INSTANCES, box_area_fraction, filter_reasons


def test_area_fraction_clips_to_the_image():
    boxes = np.array([[0, 0, 50, 100], [-10, -10, 110, 110], [90, 90, 120, 120]], dtype=float)
    assert box_area_fraction(boxes, 100, 100).tolist() == [0.5, 1.0, 0.01]


def test_large_boxes_go_first_then_rare_classes_are_counted_over_what_is_left():
    boxes = np.array([[0, 0, 10, 10], [20, 0, 30, 10], [40, 0, 50, 10],  # three cars
                      [0, 0, 100, 60],  # a fourth "car" over 50% of the image
                      [0, 50, 10, 60], [20, 50, 30, 60]], dtype=float)  # two dogs
    labels = ["car", "car", "car", "car", "dog", "dog"]
    assert filter_reasons(boxes, labels, 100, 100) == [None, None, None, BOX_TOO_LARGE,
                                                       CLASS_TOO_FEW_INSTANCES, CLASS_TOO_FEW_INSTANCES]


def test_exactly_half_the_image_is_kept_and_limits_are_configurable():
    boxes = np.array([[0, 0, 50, 100], [0, 0, 10, 10]], dtype=float)
    assert filter_reasons(boxes, ["a", "b"], 100, 100, min_class_instances=1) == [None, None]
    assert filter_reasons(boxes, ["a", "a"], 100, 100, max_area_fraction=0.4, min_class_instances=1) == [BOX_TOO_LARGE, None]
    assert filter_reasons(boxes, ["a", "a"], 100, 100, min_class_instances=2) == [None, None]


def test_no_boxes():
    assert filter_reasons(np.zeros((0, 4)), [], 10, 10) == []
