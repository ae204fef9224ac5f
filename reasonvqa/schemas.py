"""Typed, versioned pyarrow schemas of the record model shared by every stage.

Stable ids: images ``<source>:<native id>`` (``vg:1``, ``gldv2:7e4627eb6f721857``);
objects ``<image_id>/o<native id>``; relations ``<image_id>/r<native id>``.
Boxes are XYWH in pixels; a null box means "the whole image".
"""

from __future__ import annotations

import pyarrow as pa

# 2.0.0: QUESTIONS gained task_type, evidence_region_ids, is_hallucination (one schema for template,
# verified and grounded questions); a 1.x reader cannot read 2.x question tables.
# 2.1.0: QUESTIONS gained absence_basis and absence_evidence (what backs a hallucination row's absence claim).
SCHEMA_VERSION = "2.1.0"

RLE = pa.struct([("size", pa.list_(pa.int32())), ("counts", pa.string())])

IMAGES = pa.schema(
    [
        ("image_id", pa.string()),
        ("source", pa.string()),
        ("source_image_id", pa.string()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("url", pa.string()),
        ("file_path", pa.string()),
        ("group_id", pa.string()),  # e.g. GLDv2 landmark_id; null when the source has none
        ("is_clean", pa.bool_()),  # GLDv2 train_clean membership; null when not applicable
        ("visual_domain", pa.string()),  # the source's declared domain: landmarks, indoor, outdoor, driving, robotics, ...
        ("license", pa.string()),  # license of the image, as the source declares it
        ("context", pa.string()),  # text that comes with the image: a scene description, a robot instruction
    ]
)

OBJECTS = pa.schema(
    [
        ("object_id", pa.string()),
        ("image_id", pa.string()),
        ("label", pa.string()),
        ("names", pa.list_(pa.string())),
        ("synset", pa.string()),  # first WordNet 3.0 synset name, e.g. dog.n.01
        ("synsets", pa.list_(pa.string())),
        ("x", pa.float64()),
        ("y", pa.float64()),
        ("w", pa.float64()),
        ("h", pa.float64()),
        ("mask", RLE),  # COCO RLE, null when no mask
        ("score", pa.float32()),  # detector score; null for human annotations
        ("origin", pa.string()),  # "annotation:vg", "annotation:gldv2", "grounding_dino", ...
        ("commons_category", pa.string()),  # Commons category name without "Category:"
    ]
)

# Pixel evidence: one row per region (an annotated or proposed box, optionally with a mask).
# Region ids: ``<image_id>/g<native id>``. Sources with existing annotations (SA-1B, nuScenes)
# write this table; the proposals stage adds model regions with origin, score and prompt; the
# grounded-questions stage adds box-only regions for annotated objects without one (Visual Genome,
# ``<image_id>/g<object native id>``, origin ``annotation:vg``). A release's ``regions/`` table has
# this schema; questions point into it through ``evidence_region_ids``. The box is x, y, w, h
# (XYWH, pixels); ``mask`` is a COCO RLE {size: [height, width], counts: compressed string}
# (pycocotools ``decode`` reads it).
REGIONS = pa.schema(
    [
        ("region_id", pa.string()),
        ("image_id", pa.string()),
        ("label", pa.string()),  # class name; null when the source has none (SA-1B)
        ("x", pa.float64()),  # box XYWH in pixels of the original image
        ("y", pa.float64()),
        ("w", pa.float64()),
        ("h", pa.float64()),
        ("mask", RLE),  # COCO RLE (compressed counts string), null when no mask
        ("area", pa.float64()),  # mask area in pixels (box area when there is no mask)
        ("score", pa.float32()),  # model or annotation confidence; null when none
        ("predicted_iou", pa.float32()),  # SAM-family predicted IoU
        ("stability_score", pa.float32()),  # SAM-family stability score
        ("origin", pa.string()),  # "annotation:sa1b", "annotation:nuscenes", "grounding_dino+sam", ...
        ("prompt", pa.string()),  # the text prompt a model was given; null for annotations
        ("attributes", pa.list_(pa.string())),  # e.g. nuScenes attribute names
        ("visibility", pa.string()),  # e.g. nuScenes visibility token ("1".."4")
        ("center_3d", pa.list_(pa.float64())),  # x, y, z in the camera frame (metres) where the source has 3D boxes
        ("extra", pa.string()),  # source-specific fields as sorted-key JSON, null when none
    ]
)

RELATIONS = pa.schema(
    [
        ("relation_id", pa.string()),
        ("image_id", pa.string()),
        ("subject_id", pa.string()),
        ("object_id", pa.string()),
        ("predicate", pa.string()),
        ("subject_label", pa.string()),
        ("object_label", pa.string()),
        ("synset", pa.string()),
    ]
)

ATTRIBUTES = pa.schema(
    [
        ("object_id", pa.string()),
        ("image_id", pa.string()),
        ("attribute", pa.string()),
    ]
)

ENTITY_LINKS = pa.schema(
    [
        ("object_id", pa.string()),
        ("image_id", pa.string()),
        ("qid", pa.string()),
        ("label", pa.string()),  # English label of the item
        ("method", pa.string()),  # "wordnet:p8814", "wordnet:p8814:hypernym", "commons:sitelink-p301", "commons:p373"
        ("synset", pa.string()),  # WordNet 3.0 name the link started from, null for landmarks
        ("wn30_offset", pa.string()),  # "02084071-n"
        ("wn31_offset", pa.string()),  # "02086723-n"
        ("hypernym_depth", pa.int8()),  # 0 for a direct link
    ]
)

FACTS = pa.schema(
    [
        ("subject_qid", pa.string()),
        ("subject_label", pa.string()),
        ("property_id", pa.string()),
        ("hop", pa.int8()),  # 1 = subject is a linked item; 2, 3 = reached through item-valued facts
        ("value_type", pa.string()),  # "item", "quantity", "time", "string", "monolingualtext"
        ("value_qid", pa.string()),
        ("value_label", pa.string()),  # English label (item) or the literal text
        ("amount", pa.float64()),
        ("unit_qid", pa.string()),
        ("unit_label", pa.string()),
        ("time", pa.string()),  # xsd:dateTime as Wikidata gives it, e.g. "+1889-03-31T00:00:00Z"
        ("precision", pa.int8()),  # 9 year, 10 month, 11 day
        ("rank", pa.string()),  # "preferred" or "normal"
        ("point_in_time", pa.string()),  # P585 qualifier of the statement (xsd:dateTime, Wikidata JSON years), if any
    ]
)

# A release's knowledge (knowledge/release_knowledge.py): the facts its questions were generated from, with
# where and when they were fetched (the endpoint URL or the embedded mirror's id; the knowledge date).
KNOWLEDGE = pa.schema(
    [
        *FACTS,
        ("fetched_from", pa.string()),  # "https://query.wikidata.org/sparql", "oxigraph-mirror:sha256:..."
        ("fetched_on", pa.string()),  # the knowledge date: the refresh period of an endpoint, the mirror's newest edit
    ]
)

# Every SPARQL answer the linking and facts stages used (knowledge/recorded.py): what `build --knowledge-from`
# replays, so the rebuild asks the same questions of the same answers, offline.
KNOWLEDGE_QUERIES = pa.schema(
    [
        ("query", pa.string()),  # the query text as sent
        ("answer", pa.string()),  # its bindings as canonical JSON (sorted rows, sorted keys)
    ]
)

QUESTIONS = pa.schema(
    [
        ("question_id", pa.string()),
        ("image_id", pa.string()),
        ("image_source", pa.string()),
        ("object_ids", pa.list_(pa.string())),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("answer_qid", pa.string()),
        ("answer_category", pa.string()),  # fixed, date, number, literal
        ("choices", pa.list_(pa.string())),
        ("n_hop", pa.int8()),
        ("route", pa.list_(pa.string())),  # property path, e.g. ["P131", "P17", "P36"]
        ("property_id", pa.string()),  # the property asked about (last of the route)
        ("domains", pa.list_(pa.string())),
        ("has_scene_graph", pa.bool_()),
        ("template_ids", pa.list_(pa.string())),
        ("template_version", pa.string()),
        ("knowledge_snapshot", pa.string()),
        # one schema for every question kind; the columns below are null where a kind has no value
        ("kind", pa.string()),  # "template", "verified" (PROVE), "grounded" (regions), "grounded_vlm"; null: a 1.x templated row
        ("generator_model", pa.string()),
        ("program", pa.string()),  # the verification program, def execute_command(scene_graph) / def verify(sg)
        ("program_output", pa.string()),  # its output on the scene graph, as JSON text
        ("similarity", pa.float32()),  # cosine(program output, answer)
        ("evidence_object_ids", pa.list_(pa.string())),
        # VistaQA task type: identification, attribute, ocr, spatial, counting, comparison; "knowledge" for
        # templated questions, "free_form" for verified ones
        ("task_type", pa.string()),
        ("evidence_region_ids", pa.list_(pa.string())),  # regions (release regions/ table) proving the answer; [] for hallucination
        ("is_hallucination", pa.bool_()),  # the asked thing is absent: the answer says so and the evidence is empty
        # what backs the absence claim of a hallucination row (reasonvqa/absence_bases.py BASES: taxonomy, review,
        # detector, cooccurrence, annotated_attribute, annotated_relation, refuting_boxes, vlm); null on other rows
        # and on hallucination rows without a basis (never released: balancing sets them aside)
        ("absence_basis", pa.string()),
        ("absence_evidence", pa.string()),  # the basis's particulars as sorted-key JSON (taxonomy, estimate and threshold, decision id)
    ]
)
MULTIPLE_CHOICE_KINDS = ("template",)  # kinds whose questions need choices; a null kind is a 1.x templated row
GROUNDED_KINDS = ("grounded", "grounded_vlm")  # kinds whose questions are about image regions

REJECTS = pa.schema(
    [
        ("stage", pa.string()),
        ("shard", pa.int32()),
        ("reason", pa.string()),
        ("source", pa.string()),  # file and record location, e.g. "objects.json#[3].objects[7]"
        ("record", pa.string()),  # the rejected record as JSON text (or raw text when unparsable)
    ]
)

MANIFEST = "manifest.json"  # a release's manifest: files with sha256, counts, inputs, config (tasks/release/writer.py)

# the knowledge tables a release carries beside its questions (knowledge/release_knowledge.py)
FACTS_TABLE = "knowledge"
QUERIES_TABLE = "knowledge_queries"  # every SPARQL answer the linking and facts stages used (knowledge/recorded.py)
LINKS_TABLE = "entity_links"
KNOWLEDGE_TABLES = (FACTS_TABLE, QUERIES_TABLE, LINKS_TABLE)

TABLES: dict[str, pa.Schema] = {
    "images": IMAGES,
    "objects": OBJECTS,
    "relations": RELATIONS,
    "attributes": ATTRIBUTES,
    "regions": REGIONS,
    "entity_links": ENTITY_LINKS,
    "facts": FACTS,
    "knowledge": KNOWLEDGE,
    "knowledge_queries": KNOWLEDGE_QUERIES,
    "questions": QUESTIONS,
    "rejects": REJECTS,
}


def empty(schema: pa.Schema) -> pa.Table:
    """An empty table of ``schema``."""
    return schema.empty_table()


def from_rows(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Build a table from dict rows, filling missing columns with nulls."""
    return pa.Table.from_pylist(rows, schema=schema)


# Nullable QUESTIONS columns of the non-template kinds: tables without them (templated questions,
# tables written before they existed) conform with nulls there.
OPTIONAL_COLUMNS = frozenset({"kind", "generator_model", "program", "program_output", "similarity", "evidence_object_ids",
                              "task_type", "evidence_region_ids", "is_hallucination", "absence_basis",
                              "absence_evidence"})


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Cast ``table`` to ``schema`` (same column order); raises on missing columns (OPTIONAL_COLUMNS become nulls)."""
    for f in schema:
        if f.name in OPTIONAL_COLUMNS and f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise ValueError(f"table lacks columns {missing} of the schema")
    return table.select(schema.names).cast(schema)
