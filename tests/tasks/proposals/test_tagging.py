"""Tagging backends without models and the stop-list."""

from reasonvqa.tasks.proposals.config import DEFAULT_STOP_LIST, TaggingConfig
from reasonvqa.tasks.proposals.tagging import TagRequest, apply_stop_list, build_tagger, load_stop_list


def test_bundled_stop_list_drops_scenes_colours_materials_and_keeps_objects():
    stop = load_stop_list(DEFAULT_STOP_LIST, extra=["Sky"])
    kept, dropped = apply_stop_list(["Red", "car", "living room", "wooden", "traffic light", "sky", "car", "stand"], stop)
    assert kept == ["car", "traffic light"]
    assert dropped == ["red", "living room", "wooden", "sky", "stand"]


def test_stop_list_file_format(tmp_path):
    path = tmp_path / "stop.txt"
    path.write_text("# comment\n\nBlue  # colour\n  night \n", encoding="utf-8")
    assert load_stop_list(path) == frozenset({"blue", "night"})


def test_labels_and_vocabulary_backends():
    requests = [TagRequest("vg:1", None, ("dog", "man")), TagRequest("vg:2", None, ())]
    assert build_tagger(TaggingConfig(backend="labels"), "cpu").tag(requests) == [["dog", "man"], []]
    vocabulary = build_tagger(TaggingConfig(backend="vocabulary", vocabulary=["car", "bus"]), "cpu")
    assert vocabulary.tag(requests) == [["car", "bus"], ["car", "bus"]]
    assert not vocabulary.needs_pixels
