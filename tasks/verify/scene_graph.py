"""PROVE's scene graph (Lst. 1 of the PROVE paper) on networkx, built from Visual Genome tables
or from the caption tuple form, with a JSON round trip.

The caption tuple form is ``{entity: {"attributes": [...], "relations_to": {target: [relation, ...]}}}``.
PROVE's listing also allows typed values (``"attributes": {type: [values]}`` and
``"relations_to": {target: {type: [values]}}``); both are read. Internally a list becomes the
type ``"attributes"`` (nodes) or ``"relations"`` (edges), so ``get_attributes("dog")`` returns
``{"attributes": ["brown", "small"]}`` and ``get_outgoing_relations("dog")`` returns
``{"grass": {"relations": ["on"]}}``.

PROVE's Figure 3 programs spell three methods differently from its Lst. 1: ``get_attrs``,
``get_incoming_rels`` and ``subgraph``; the first two are aliases here, ``subgraph`` is
networkx's own (the same node-induced view ``generate_subgraph`` returns).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable

import networkx as nx

if TYPE_CHECKING:  # the sandbox worker imports this module and should stay small
    import pyarrow as pa

NODE_TYPE = "attributes"
EDGE_TYPE = "relations"


class SceneGraphError(ValueError):
    """A scene graph in a shape neither the tuple form nor the JSON form describes."""


def _typed_values(value: Any, default_type: str, where: str) -> dict[str, list[str]]:
    """``[v, ...]`` -> {default_type: [v, ...]}; ``{type: v | [v, ...]}`` -> {type: [v, ...]}."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        values = [str(v) for v in value if v is not None]
        return {default_type: list(dict.fromkeys(values))} if values else {}
    if isinstance(value, dict):
        typed: dict[str, list[str]] = {}
        for key, vals in value.items():
            vals = [vals] if isinstance(vals, str) else vals
            if not isinstance(vals, list):
                raise SceneGraphError(f"{where}: values of {key!r} must be a string or a list, got {type(vals).__name__}")
            typed[str(key)] = list(dict.fromkeys(str(v) for v in vals))
        return typed
    raise SceneGraphError(f"{where}: expected a list or a dict, got {type(value).__name__}")


class SceneGraph(nx.DiGraph):
    """Directed graph with attributed entities as nodes and relations as edges (PROVE Lst. 1).

    ``object_ids`` maps an entity to the source object ids it stands for (Visual Genome objects),
    so answers can name their evidence.
    """

    def __init__(self, caption: str = "", sg_dict: dict | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.caption = caption
        self.sg_dict: dict[str, dict] = {}
        self.object_ids: dict[str, list[str]] = {}
        for source, metadata in (sg_dict or {}).items():
            if not isinstance(metadata, dict):
                raise SceneGraphError(f"entity {source!r}: expected an object with attributes and relations_to")
            unknown = set(metadata) - {"attributes", "relations_to"}
            if unknown:
                raise SceneGraphError(f"entity {source!r}: unknown keys {sorted(unknown)}")
            attributes = _typed_values(metadata.get("attributes"), NODE_TYPE, f"entity {source!r} attributes")
            self.add_node(str(source), **attributes)
            relations_to = metadata.get("relations_to") or {}
            if not isinstance(relations_to, dict):
                raise SceneGraphError(f"entity {source!r}: relations_to must be an object")
            for target, rel_info in relations_to.items():
                if str(target) not in self:
                    self.add_node(str(target))
                self.add_edge(str(source), str(target),
                              **_typed_values(rel_info, EDGE_TYPE, f"relation {source!r} -> {target!r}"))
        self.sg_dict = self.to_tuples()

    # --- PROVE's API (Lst. 1) -------------------------------------------------------------
    def generate_subgraph(self, node_list: Iterable[str]) -> "SceneGraph":
        """Generates a subgraph with nodes in node_list."""
        return nx.subgraph(self, [n for n in node_list if n in self])

    def describe(self, subgraph: nx.DiGraph | None = None) -> str:
        """Generate a natural language description of a subgraph (the whole graph by default)."""
        return describe_graph(self if subgraph is None else subgraph)

    def get_entities(self) -> list[str]:
        """Returns a list of entities in the scene graph."""
        return list(self.nodes)

    def get_attributes(self, ent_name: str) -> dict[str, list[str]]:
        """Returns the attributes of ent_name: ``{att_type: [att_value, ...]}``."""
        return dict(self.nodes[ent_name]) if ent_name in self else {}

    def get_outgoing_relations(self, ent_name: str) -> dict[str, dict[str, list[str]]]:
        """Relations for which ent_name is the source: ``{target: {rel_type: [rel_value, ...]}}``."""
        if ent_name not in self:
            return {}
        return {target: dict(data) for _, target, data in self.out_edges(ent_name, data=True)}

    def get_incoming_relations(self, ent_name: str) -> dict[str, dict[str, list[str]]]:
        """Relations for which ent_name is the target: ``{source: {rel_type: [rel_value, ...]}}``."""
        if ent_name not in self:
            return {}
        return {source: dict(data) for source, _, data in self.in_edges(ent_name, data=True)}

    # PROVE Figure 3's spellings of the Lst. 1 names (``subgraph`` is networkx's: see the module docstring)
    get_attrs = get_attributes
    get_incoming_rels = get_incoming_relations

    # --- forms ----------------------------------------------------------------------------
    def to_tuples(self) -> dict[str, dict]:
        """The typed tuple form of every entity (input form of ``SceneGraph``)."""
        return {
            node: {"attributes": {k: list(v) for k, v in data.items()},
                   "relations_to": {t: {k: list(v) for k, v in d.items()} for _, t, d in self.out_edges(node, data=True)}}
            for node, data in self.nodes(data=True)
        }

    def to_json(self) -> dict:
        """JSON-ready form: caption, typed tuples, object ids."""
        return {"caption": self.caption, "scene_graph": self.to_tuples(),
                "object_ids": {k: list(v) for k, v in self.object_ids.items()}}

    @classmethod
    def from_json(cls, data: Any) -> "SceneGraph":
        """Read ``to_json`` output or a bare caption tuple form."""
        if not isinstance(data, dict):
            raise SceneGraphError(f"a scene graph is a JSON object, got {type(data).__name__}")
        if isinstance(data.get("scene_graph"), dict) and set(data) <= {"caption", "scene_graph", "object_ids"}:
            graph = cls(str(data.get("caption") or ""), data["scene_graph"])
            graph.object_ids = {str(k): [str(i) for i in v] for k, v in (data.get("object_ids") or {}).items()}
            return graph
        return cls("", data)

    def dumps(self) -> str:
        """Canonical JSON text (sorted keys), identical for equal graphs."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def without(self, entity: str) -> "SceneGraph":
        """A copy with ``entity`` and its relations removed (the perturbed graph of the tautology test)."""
        tuples = {node: {"attributes": meta["attributes"],
                         "relations_to": {t: r for t, r in meta["relations_to"].items() if t != entity}}
                  for node, meta in self.to_tuples().items() if node != entity}
        graph = SceneGraph(self.caption, tuples)
        graph.object_ids = {k: v for k, v in self.object_ids.items() if k != entity}
        return graph


def describe_graph(graph: nx.DiGraph) -> str:
    """One sentence per entity, then one per relation, in graph order, worded like PROVE's Figure 3:
    ``There is a cargo carts (with count == several and state grouped together).`` Typed attributes
    read ``<type> <values>``, untyped ones (type ``attributes``) their values alone; a comparison
    value as DSG writes counts (``==several``) gets a space after the operator."""
    sentences = []
    for node, data in graph.nodes(data=True):
        phrases = [_attribute_phrase(kind, values) for kind, values in data.items() if values]
        sentences.append(f"There is a {node} (with {' and '.join(phrases)})." if phrases else f"There is a {node}.")
    for source, target, data in graph.edges(data=True):
        for relation in [v for vals in data.values() for v in vals] or ["related to"]:
            sentences.append(f"The {source} is {relation} the {target}.")
    return " ".join(sentences)


def _attribute_phrase(kind: str, values: list[str]) -> str:
    text = _join([re.sub(r"^(==|!=|>=|<=|>|<)\s*", r"\1 ", str(v)) for v in values])
    return text if kind == NODE_TYPE else f"{kind} {text}"


def _join(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def entity_names(objects: list[dict]) -> dict[str, str]:
    """Unique entity names for objects of one image: the label, then ``label 2``, ``label 3``... in object order."""
    seen: dict[str, int] = defaultdict(int)
    names = {}
    for obj in objects:
        label = (obj.get("label") or "object").strip() or "object"
        seen[label] += 1
        names[obj["object_id"]] = label if seen[label] == 1 else f"{label} {seen[label]}"
    return names


def from_tables(objects: "pa.Table", attributes: "pa.Table", relations: "pa.Table", caption: str = "") -> dict[str, SceneGraph]:
    """One scene graph per image from OBJECTS, ATTRIBUTES and RELATIONS tables (Visual Genome).

    Objects are taken in object_id order; attributes and relations of unknown objects are skipped.
    """
    by_image: dict[str, list[dict]] = defaultdict(list)
    for obj in sorted(objects.select(["object_id", "image_id", "label"]).to_pylist(), key=lambda o: o["object_id"]):
        by_image[obj["image_id"]].append(obj)
    attrs: dict[str, list[str]] = defaultdict(list)
    for row in attributes.select(["object_id", "attribute"]).to_pylist():
        if row["attribute"]:
            attrs[row["object_id"]].append(row["attribute"].strip())
    rels: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for row in sorted(relations.select(["relation_id", "subject_id", "object_id", "predicate"]).to_pylist(),
                      key=lambda r: r["relation_id"]):
        if row["predicate"]:
            rels[row["subject_id"]].append((row["object_id"], row["predicate"].strip().lower()))
    graphs = {}
    for image_id, objs in sorted(by_image.items()):
        names = entity_names(objs)
        tuples: dict[str, dict] = {}
        for obj in objs:
            targets: dict[str, list[str]] = defaultdict(list)
            for target_id, predicate in rels.get(obj["object_id"], []):
                if target_id in names:
                    targets[names[target_id]].append(predicate)
            tuples[names[obj["object_id"]]] = {"attributes": attrs.get(obj["object_id"], []),
                                               "relations_to": dict(targets)}
        graph = SceneGraph(caption, tuples)
        graph.object_ids = {name: [oid] for oid, name in names.items()}
        graphs[image_id] = graph
    return graphs
