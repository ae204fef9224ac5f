"""Label co-occurrence over a literal corpus: scenes (images sharing a label) and how many of them hold each label."""

from __future__ import annotations

import polars as pl

from reasonvqa.tasks.questions.cooccurrence import Cooccurrence

PAIRS = pl.DataFrame({"image_id": ["vg:1", "vg:1", "vg:2", "vg:2", "vg:3", "vg:3", "vg:4", "gldv2:a"],
                      "label": ["car", "tree", "car", "road", "tree", "sky", "dog", "Eiffel Tower"]})


def test_scenes_and_scores_count_the_images_sharing_a_label():
    scenes, scores = Cooccurrence(PAIRS).scenes_and_scores(["vg:1", "vg:4", "vg:9"])
    # vg:1 shares car with vg:2 and tree with vg:3; vg:4 shares nothing; vg:9 is not in the corpus
    assert scenes.to_dicts() == [{"image_id": "vg:1", "n": 2}]
    assert scenes.schema == {"image_id": pl.String, "n": pl.UInt32} and scores.schema["k"] == pl.UInt32
    assert sorted(scores.iter_rows()) == [("vg:1", "car", 1), ("vg:1", "road", 1), ("vg:1", "sky", 1), ("vg:1", "tree", 1)]


def test_the_image_itself_is_never_its_own_scene():
    pairs = pl.DataFrame({"image_id": ["vg:1", "vg:2", "vg:2", "vg:3"], "label": ["cup", "cup", "plate", "cup"]})
    scenes, scores = Cooccurrence(pairs).scenes_and_scores(["vg:1", "vg:2"])
    assert sorted(scenes.iter_rows()) == [("vg:1", 2), ("vg:2", 2)]
    assert sorted(scores.iter_rows()) == [("vg:1", "cup", 2), ("vg:1", "plate", 1), ("vg:2", "cup", 2)]
    empty_scenes, empty_scores = Cooccurrence(pairs).scenes_and_scores([])
    assert empty_scenes.height == 0 and empty_scores.columns == ["image_id", "label", "k"]
