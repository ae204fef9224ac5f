"""Literal fixtures in the record model: one Visual Genome street scene and one landmark photo,
linked items, and a small fact table (real Wikidata items and values, trimmed); the grounded stage's result on
50 real Visual Genome images (``vg50``, data/vg_first50)."""

from __future__ import annotations

import glob
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.tasks.questions.bank import load_bank
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.grounded_shard import generate_grounded
from reasonvqa.tasks.questions.hallucination_relation import corpus_relation_counts
from reasonvqa.tasks.questions.regions import image_labels, object_region_id, shard_regions
from reasonvqa.tasks.sources.vg import ingest_vg

VG50 = Path(__file__).parent / "data" / "vg_first50"


def item(subject, label, prop, qid, value_label, hop=1, rank="normal"):
    return dict(subject_qid=subject, subject_label=label, property_id=prop, hop=hop, value_type="item",
                value_qid=qid, value_label=value_label, rank=rank)


def quantity(subject, label, prop, amount, unit_qid="Q11573", unit_label="metre", hop=1, rank="normal"):
    return dict(subject_qid=subject, subject_label=label, property_id=prop, hop=hop, value_type="quantity",
                amount=amount, unit_qid=unit_qid, unit_label=unit_label, rank=rank)


def time(subject, label, prop, value, precision, hop=1, rank="normal"):
    return dict(subject_qid=subject, subject_label=label, property_id=prop, hop=hop, value_type="time",
                time=value, precision=precision, rank=rank)


def string(subject, label, prop, text, hop=1, rank="normal"):
    return dict(subject_qid=subject, subject_label=label, property_id=prop, hop=hop, value_type="string",
                value_label=text, rank=rank)


COUNTRIES = [  # country, label, capital, capital label, continent, currency
    ("Q142", "France", "Q90", "Paris", "Q46", "Europe", "Q4916", "euro"),
    ("Q183", "Germany", "Q64", "Berlin", "Q46", "Europe", "Q4916", "euro"),
    ("Q38", "Italy", "Q220", "Rome", "Q46", "Europe", "Q4916", "euro"),
    ("Q29", "Spain", "Q2807", "Madrid", "Q46", "Europe", "Q4916", "euro"),
    ("Q17", "Japan", "Q1490", "Tokyo", "Q48", "Asia", "Q8146", "Japanese yen"),
    ("Q30", "United States", "Q61", "Washington, D.C.", "Q49", "North America", "Q4917", "United States dollar"),
]


def fact_rows() -> list[dict]:
    rows = [
        # Eiffel Tower (linked landmark, hop 1)
        item("Q243", "Eiffel Tower", "P31", "Q1440476", "lattice tower"),
        item("Q243", "Eiffel Tower", "P31", "Q570116", "tourist attraction"),
        item("Q243", "Eiffel Tower", "P17", "Q142", "France"),
        item("Q243", "Eiffel Tower", "P131", "Q90", "Paris"),
        item("Q243", "Eiffel Tower", "P84", "Q2335264", "Stephen Sauvestre"),
        quantity("Q243", "Eiffel Tower", "P2048", 330, rank="preferred"),
        quantity("Q243", "Eiffel Tower", "P2048", 300),
        time("Q243", "Eiffel Tower", "P571", "+1889-03-31T00:00:00Z", 11),
        item("Q243", "Eiffel Tower", "P186", "Q11427", "wrought iron"),
        item("Q243", "Eiffel Tower", "P1435", "Q916475", None),  # no English label
        item("Q243", "Eiffel Tower", "P127", "Q90", "Paris"),  # two owners: not single-answer
        item("Q243", "Eiffel Tower", "P127", "Q3488244", "Société d'exploitation de la tour Eiffel"),
        # Mount Everest (linked landmark, hop 1), values as in its Wikidata entity
        item("Q513", "Mount Everest", "P31", "Q8502", "mountain"),
        item("Q513", "Mount Everest", "P31", "Q570116", "tourist attraction"),
        item("Q513", "Mount Everest", "P17", "Q837", "Nepal", rank="preferred"),
        item("Q513", "Mount Everest", "P17", "Q148", "People's Republic of China", rank="preferred"),
        item("Q513", "Mount Everest", "P30", "Q48", "Asia"),
        quantity("Q513", "Mount Everest", "P2044", 8848.86, rank="preferred"),
        quantity("Q513", "Mount Everest", "P2044", 8844.43),
        # another mountain (data/knowledge/transcribed.yaml): the real elevations span 2,351-8,849 m
        quantity("Q928681", "Mount Pico", "P2044", 2351, hop=2),
        item("Q928681", "Mount Pico", "P31", "Q8502", "mountain", hop=2),
        # its architect (hop 2)
        time("Q2335264", "Stephen Sauvestre", "P569", "+1847-12-26T00:00:00Z", 11, hop=2),
        item("Q2335264", "Stephen Sauvestre", "P27", "Q142", "France", hop=2),
        # car and bus (Visual Genome classes, hop 1)
        item("Q1420", "car", "P279", "Q752870", "motor vehicle"),
        item("Q1420", "car", "P61", "Q313", "Carl Benz"),
        time("Q1420", "car", "P575", "+1886-00-00T00:00:00Z", 9),
        item("Q5638", "bus", "P279", "Q752870", "motor vehicle"),
        item("Q5638", "bus", "P176", "Q27530", "Mercedes-Benz Group"),
        item("Q5638", "bus", "P176", "Q160", "Volvo"),
        # a wall named by its Visual Genome label "brick wall" (no class facts): its material is in its name
        item("Q42948", "wall", "P186", "Q40089", "brick"),
        # the inventor (hop 2) and his birthplace (hop 3)
        item("Q313", "Carl Benz", "P19", "Q1022", "Mühlburg", hop=2),
        time("Q313", "Carl Benz", "P569", "+1844-11-25T00:00:00Z", 11, hop=2),
        item("Q313", "Carl Benz", "P27", "Q183", "Germany", hop=2),
        item("Q1022", "Mühlburg", "P17", "Q183", "Germany", hop=3),
        item("Q1339", "Johann Sebastian Bach", "P19", "Q7070", "Eisenach", hop=2),
        item("Q255", "Ludwig van Beethoven", "P19", "Q586", "Bonn", hop=2),
        item("Q254", "Wolfgang Amadeus Mozart", "P19", "Q34713", "Salzburg", hop=2),
        item("Q1268", "Frédéric Chopin", "P19", "Q2046", "Żelazowa Wola", hop=2),
        item("Q7186", "Marie Curie", "P19", "Q270", "Warsaw", hop=2),
        item("Q7186", "Marie Curie", "P27", "Q36", "Poland", hop=2),
        item("Q937", "Albert Einstein", "P27", "Q39", "Switzerland", hop=2),
        item("Q5593", "Pablo Picasso", "P27", "Q29", "Spain", hop=2),
        item("Q35", "Denmark", "P61", "Q9036", "Nikola Tesla", hop=2),
        item("Q12876", "tank", "P61", "Q1370", "Ernest Swinton", hop=2),
        item("Q11019", "machine", "P61", "Q868", "Aristotle", hop=2),
        item("Q5880", "airplane", "P61", "Q35820", "Wright brothers", hop=2),
    ]
    for qid, label, cap, cap_label, cont, cont_label, cur, cur_label in COUNTRIES:
        rows += [
            item(qid, label, "P36", cap, cap_label, hop=2),
            item(qid, label, "P30", cont, cont_label, hop=2),
            item(qid, label, "P38", cur, cur_label, hop=2),
            item(cap, cap_label, "P17", qid, label, hop=3),
        ]
    rows += [
        quantity("Q142", "France", "P1082", 68373433, unit_qid=None, unit_label=None, hop=2) | {"point_in_time": "+2023-01-01T00:00:00Z"},
        time("Q142", "France", "P571", "+0843-00-00T00:00:00Z", 9, hop=2),
        quantity("Q90", "Paris", "P1082", 2102650, unit_qid=None, unit_label=None, hop=3, rank="preferred")
        | {"point_in_time": "+2021-01-01T00:00:00Z"},
        quantity("Q90", "Paris", "P1082", 2165423, unit_qid=None, unit_label=None, hop=3),
        item("Q243", "Eiffel Tower", "P138", "Q1", None, rank="deprecated"),
    ]
    return rows + typing_rows()


def typing_rows() -> list[dict]:
    """P31/P279 facts that template subject types check (class chains come at hop 4, as the facts stage fetches them)."""
    people = ["Q2335264", "Q313", "Q1339", "Q255", "Q254", "Q1268", "Q7186", "Q937", "Q5593", "Q9036", "Q1370", "Q868"]
    countries = [c[0] for c in COUNTRIES] + ["Q36", "Q39", "Q35"]
    rows = [item(q, None, "P31", "Q5", "human", hop=2) for q in people]
    rows += [item(q, None, "P31", "Q6256", "country", hop=2) for q in countries]
    rows += [item(c[2], c[3], "P31", "Q515", "city", hop=3) for c in COUNTRIES]
    rows += [
        item("Q1022", "Mühlburg", "P31", "Q486972", "human settlement", hop=3),
        item("Q1440476", "lattice tower", "P279", "Q12518", "tower", hop=4),
        item("Q752870", "motor vehicle", "P279", "Q42889", "vehicle", hop=4),
    ]
    return rows


@pytest.fixture(scope="session")
def bank():
    return load_bank()


@pytest.fixture()
def facts() -> pa.Table:
    return schemas.from_rows(fact_rows(), schemas.FACTS)


@pytest.fixture()
def images() -> pa.Table:
    return schemas.from_rows(
        [
            dict(image_id="vg:1", source="vg", source_image_id="1", width=800, height=600),
            dict(image_id="gldv2:7e4627eb6f721857", source="gldv2", source_image_id="7e4627eb6f721857", group_id="1"),
            dict(image_id="gldv2:0a1b2c3d4e5f6789", source="gldv2", source_image_id="0a1b2c3d4e5f6789", group_id="2"),
        ],
        schemas.IMAGES,
    )


def vg_object(native, label, synset):
    return dict(object_id=f"vg:1/o{native}", image_id="vg:1", label=label, names=[label], synset=synset,
                synsets=[synset] if synset else [], x=1.0, y=2.0, w=3.0, h=4.0, origin="annotation:vg")


@pytest.fixture()
def objects() -> pa.Table:
    return schemas.from_rows(
        [
            vg_object(1058529, "car", "car.n.01"),
            vg_object(1058530, "sidewalk", "sidewalk.n.01"),
            vg_object(1058531, "car", "car.n.01"),
            vg_object(1058532, "bus", "bus.n.01"),
            vg_object(1058533, "street", "street.n.01"),
            vg_object(1058534, "brick wall", "wall.n.01"),
            dict(object_id="gldv2:7e4627eb6f721857/o0", image_id="gldv2:7e4627eb6f721857", label="Eiffel Tower",
                 names=["Eiffel Tower"], origin="annotation:gldv2", commons_category="Eiffel Tower"),
            dict(object_id="gldv2:0a1b2c3d4e5f6789/o0", image_id="gldv2:0a1b2c3d4e5f6789", label="Mount Everest",
                 names=["Mount Everest"], origin="annotation:gldv2", commons_category="Mount Everest"),
        ],
        schemas.OBJECTS,
    )


@pytest.fixture()
def relations() -> pa.Table:
    def rel(native, subj, obj, predicate, subj_label, obj_label):
        return dict(relation_id=f"vg:1/r{native}", image_id="vg:1", subject_id=f"vg:1/o{subj}", object_id=f"vg:1/o{obj}",
                    predicate=predicate, subject_label=subj_label, object_label=obj_label)

    return schemas.from_rows(
        [
            rel(4265927, 1058529, 1058530, "parked next to", "car", "sidewalk"),
            rel(4265928, 1058532, 1058533, "ON", "bus", "street"),
            rel(4265929, 1058531, 1058533, "is on", "car", "street"),  # same words as the bus: ambiguous
        ],
        schemas.RELATIONS,
    )


@pytest.fixture()
def links() -> pa.Table:
    def link(obj, qid, label, method, synset=None):
        return dict(object_id=obj, image_id=obj.split("/")[0], qid=qid, label=label, method=method, synset=synset, hypernym_depth=0)

    return schemas.from_rows(
        [
            link("vg:1/o1058529", "Q1420", "car", "wordnet:p8814", "car.n.01"),
            link("vg:1/o1058531", "Q1420", "car", "wordnet:p8814", "car.n.01"),
            link("vg:1/o1058532", "Q5638", "bus", "wordnet:p8814", "bus.n.01"),
            link("vg:1/o1058534", "Q42948", "wall", "wordnet:p8814", "wall.n.01"),
            link("gldv2:7e4627eb6f721857/o0", "Q243", "Eiffel Tower", "commons:sitelink-p301"),
            link("gldv2:0a1b2c3d4e5f6789/o0", "Q513", "Mount Everest", "commons:p373"),
        ],
        schemas.ENTITY_LINKS,
    )


@pytest.fixture(scope="module")
def vg50(tmp_path_factory):
    """(generate_grounded's result, the regions, region id -> synset) of the 50 images, default config."""
    stage = tmp_path_factory.mktemp("vg50") / "stage"
    ingest_vg(VG50, stage)
    tables = {k: pa.concat_tables([pq.read_table(f) for f in sorted(glob.glob(f"{stage}/{k}/*.parquet"))])
              for k in ("images", "objects", "attributes", "relations")}
    regions = shard_regions(tables["objects"], tables["attributes"], None)
    result = generate_grounded(tables["images"], tables["objects"], tables["attributes"], regions,
                               image_labels(tables["objects"], regions), GroundedConfig(), 0,
                               relations=tables["relations"], corpus_relations=corpus_relation_counts([tables["relations"]]))
    synsets = {object_region_id(o): s for o, s in zip(tables["objects"]["object_id"].to_pylist(),
                                                      tables["objects"]["synset"].to_pylist())}
    return result, regions, synsets
