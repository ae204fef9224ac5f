import json

import pytest

from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.stage import read_table
from reasonvqa import schemas
from reasonvqa.tasks.sources.vg import ingest_vg
from reasonvqa.tasks.verify.scene_graph import SceneGraph, SceneGraphError, from_tables

TUPLES = {
    "dog": {"attributes": ["brown", "small"], "relations_to": {"grass": ["lying on"], "ball": ["next to", "looking at"]}},
    "grass": {"attributes": ["green"], "relations_to": {}},
    "ball": {"attributes": {"color": ["red"], "material": "rubber"}, "relations_to": {}},
}


def test_caption_tuple_form_and_prove_api():
    sg = SceneGraph("A small brown dog lies on the grass next to a red ball.", TUPLES)
    assert sg.get_entities() == ["dog", "grass", "ball"]
    assert sg.get_attributes("dog") == {"attributes": ["brown", "small"]}
    assert sg.get_attributes("ball") == {"color": ["red"], "material": ["rubber"]}
    assert sg.get_attributes("cat") == {}
    assert sg.get_outgoing_relations("dog") == {"grass": {"relations": ["lying on"]},
                                                "ball": {"relations": ["next to", "looking at"]}}
    assert sg.get_incoming_relations("ball") == {"dog": {"relations": ["next to", "looking at"]}}
    assert sg.get_incoming_relations("cat") == {} and sg.get_outgoing_relations("cat") == {}
    sub = sg.generate_subgraph(["dog", "grass", "cat"])
    assert sorted(sub.nodes) == ["dog", "grass"]
    assert sg.describe(sub) == ("There is a dog (with brown and small). There is a grass (with green). "
                                "The dog is lying on the grass.")
    assert "There is a ball (with color red and material rubber)." in sg.describe()


def test_json_round_trip_is_byte_identical():
    sg = SceneGraph("caption", TUPLES)
    sg.object_ids = {"dog": ["vg:1/o1"]}
    again = SceneGraph.from_json(json.loads(sg.dumps()))
    assert again.dumps() == sg.dumps()
    assert again.caption == "caption" and again.object_ids == {"dog": ["vg:1/o1"]}
    assert again.get_outgoing_relations("dog") == sg.get_outgoing_relations("dog")
    bare = SceneGraph.from_json(TUPLES)  # the bare tuple form reads too
    assert bare.get_entities() == ["dog", "grass", "ball"]


def test_relation_target_missing_from_entities_becomes_a_node():
    sg = SceneGraph("", {"man": {"attributes": [], "relations_to": {"hat": ["wearing"]}}})
    assert sg.get_entities() == ["man", "hat"] and sg.get_attributes("hat") == {}


@pytest.mark.parametrize("bad", [[1, 2], {"dog": "brown"}, {"dog": {"attributes": 3}},
                                 {"dog": {"relations_to": ["x"]}}, {"dog": {"colour": []}}])
def test_malformed_graphs_raise_a_clear_error(bad):
    with pytest.raises(SceneGraphError):
        SceneGraph.from_json(bad)


def test_without_removes_the_entity_and_its_relations():
    sg = SceneGraph("", TUPLES).without("ball")
    assert sg.get_entities() == ["dog", "grass"]
    assert sg.get_outgoing_relations("dog") == {"grass": {"relations": ["lying on"]}}


def test_from_visual_genome_tables(tmp_path):
    stage = tmp_path / "vg"
    ingest_vg(SAMPLE_DIR / "vg", stage)
    graphs = from_tables(read_table(stage, "objects", schemas.OBJECTS), read_table(stage, "attributes", schemas.ATTRIBUTES),
                         read_table(stage, "relations", schemas.RELATIONS))
    assert sorted(graphs, key=lambda i: int(i.split(":")[1]))[:2] == ["vg:1", "vg:2"]  # ids 1-50 (as text vg:10 < vg:2)
    sg = graphs["vg:1"]
    clock = next(name for name, ids in sg.object_ids.items() if ids == ["vg:1/o1058498"])
    assert clock == "clock" and sorted(sg.get_attributes("clock")["attributes"]) == ["green", "tall"]
    shade = next(name for name, ids in sg.object_ids.items() if ids == ["vg:1/o5045"])
    street = next(name for name, ids in sg.object_ids.items() if ids == ["vg:1/o5046"])
    assert "on" in sg.get_outgoing_relations(shade)[street]["relations"]
    names = sg.get_entities()
    assert len(names) == len(set(names)) == sum(1 for ids in sg.object_ids.values())
    assert SceneGraph.from_json(json.loads(sg.dumps())).dumps() == sg.dumps()
