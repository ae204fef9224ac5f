"""Raw inputs at ReasonVQA scale, in the real files' formats, for the end-to-end rehearsal (issue 34).

``make_rehearsal_inputs(folder, scale)`` writes, once per (scale, seed, generator version) and reused
after (``rehearsal.json`` holds the parameters' hash and the counts):

- ``vg/``: Visual Genome ``image_data.json``, ``objects.json``, ``attributes.json``,
  ``relationships.json`` (v1.4 field names) for 108 K x scale images: ~35 objects per image
  (Poisson), ~21 relationships, ~45 % of objects with 1-2 attributes, 5 % of objects without a
  synset; synsets are real WordNet 3.0 noun names drawn (Zipf) from the bundled table
  (``data/knowledge/wordnet/wn30_nouns.tsv.gz``), so linking goes the real way (3.0 -> 3.1 -> P8814).
- ``gldv2/``: ``train.csv`` (``id,url,landmark_id``), ``train_clean.csv``, ``train_label_to_category.csv``
  for 490 K x scale images over 20 K x scale landmarks (Zipf-sized, each landmark at least one image).
- ``entities/rehearsal.jsonl``: a Wikidata dump (JSON lines) of every item the inputs link to
  (a P8814 item for 70 % of the concepts, the others link through their hypernym; every landmark by its
  Commons sitelink and P373) and their facts up to 3 hops over template-bank properties (landmark ->
  city / person / country -> country / capital / continent), plus the classes the templates' subject
  types check. The facts are synthetic: ``rehearsal.yaml`` (the build config) names the release
  ``reasonvqa-rehearsal-synthetic``.

No image bytes are written: the VG reader takes width/height from image_data.json and GLDv2 has none
(null), so the build never opens an image (embedding is off in the config: the files do not exist).
Everything is streamed with orjson, one image or entity at a time.
"""

from __future__ import annotations

import gzip
import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Iterator

import numpy as np
import orjson

from reasonvqa.paths import DATA_DIR

GENERATOR_VERSION = 1
MARKER = "rehearsal.json"
CONFIG_FILE = "rehearsal.yaml"
RELEASE_NAME = "reasonvqa-rehearsal-synthetic"
WORDNET_TABLE = DATA_DIR / "knowledge" / "wordnet" / "wn30_nouns.tsv.gz"
MODIFIED = "2026-11-01T00:00:00Z"  # the dump's "modified": the release's knowledge date

FULL_VG_IMAGES = 108_077
FULL_GLD_IMAGES = 490_000
FULL_LANDMARKS = 20_000
OBJECTS_PER_IMAGE = 35.0
RELATIONS_PER_IMAGE = 21.0
N_COUNTRIES = 200
CONTINENTS = ["Africa", "Antarctica", "Asia", "Europe", "North America", "South America", "Oceania"]
PREDICATES = ["on", "has", "wearing", "next to", "holding", "in", "behind", "parked on", "near", "of", "in front of",
              "above", "under", "holds", "sitting on", "standing on", "beside", "along", "covering", "with"]
ATTRIBUTES = ["white", "black", "blue", "green", "red", "brown", "yellow", "small", "large", "wooden", "tall", "metal",
              "silver", "orange", "grey", "pink", "clear", "dark", "round", "open", "long", "glass", "short", "cloudy",
              "striped", "plastic", "empty", "parked", "standing", "sitting", "bare", "old", "young", "wet", "leafy"]
# template-bank classes the synthetic landmarks and concepts fall under (templates/classes.yaml)
LANDMARK_SUPERCLASSES = [("Q41176", "building"), ("Q12518", "tower"), ("Q8502", "mountain"), ("Q12280", "bridge")]
NAMED_CLASSES = [("Q6256", "country"), ("Q515", "city"), ("Q5", "human"), ("Q570116", "tourist attraction"),
                 ("Q223557", "physical object"), ("Q11573", "metre"), ("Q11570", "kilogram")] + LANDMARK_SUPERCLASSES
# id bases of the synthetic items (disjoint ranges)
COUNTRY, CITY, PERSON, LANDMARK, CONCEPT = 1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000
LANDMARK_CLASS, CONCEPT_SUPER, MATERIAL, CONTINENT, CURRENCY = 6_000_000, 6_100_000, 7_000_000, 8_000_000, 8_100_000


@dataclass(frozen=True)
class RehearsalCounts:
    """What one generation wrote (also kept in the marker)."""

    vg_images: int
    vg_objects: int
    vg_relationships: int
    vg_attributes: int
    gld_images: int
    gld_landmarks: int
    concepts: int
    concept_items: int
    entities: int
    statements: int


@dataclass(frozen=True)
class RehearsalInputs:
    folder: Path
    scale: float
    counts: RehearsalCounts

    @property
    def config(self) -> Path:
        return self.folder / CONFIG_FILE


def _sizes(scale: float) -> dict[str, int]:
    return {
        "vg": max(1, round(FULL_VG_IMAGES * scale)),
        "gld": max(1, round(FULL_GLD_IMAGES * scale)),
        "landmarks": max(1, round(FULL_LANDMARKS * scale)),
        "concepts": max(50, round(7_000 * math.sqrt(scale))),  # distinct synsets grow slower than images
        "cities": max(50, round(20_000 * scale)),
        "people": max(50, round(20_000 * scale)),
    }


def parameters_hash(scale: float, seed: int) -> str:
    """The marker's key: scale, seed and generator version."""
    return hashlib.sha256(orjson.dumps({"scale": scale, "seed": seed, "version": GENERATOR_VERSION})).hexdigest()


def make_rehearsal_inputs(folder: Path, scale: float, seed: int = 0) -> RehearsalInputs:
    """Write the rehearsal's raw inputs under ``folder`` (reused when its marker matches)."""
    folder = Path(folder)
    marker = folder / MARKER
    key = parameters_hash(scale, seed)
    if marker.exists():
        saved = orjson.loads(marker.read_bytes())
        if saved.get("parameters") == key:
            return RehearsalInputs(folder, scale, RehearsalCounts(**saved["counts"]))
        marker.unlink()
    sizes = _sizes(scale)
    rng = np.random.default_rng(seed)
    concepts = _pick_concepts(rng, sizes["concepts"])
    for sub in ("vg", "gldv2", "entities"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    vg = _write_vg(folder / "vg", rng, sizes["vg"], concepts)
    gld_images = _write_gldv2(folder / "gldv2", rng, sizes["gld"], sizes["landmarks"])
    entities, statements, concept_items = _write_entities(folder / "entities" / "rehearsal.jsonl", rng, sizes, concepts)
    counts = RehearsalCounts(vg_images=sizes["vg"], vg_objects=vg[0], vg_relationships=vg[1], vg_attributes=vg[2],
                             gld_images=gld_images, gld_landmarks=sizes["landmarks"], concepts=len(concepts),
                             concept_items=concept_items, entities=entities, statements=statements)
    (folder / CONFIG_FILE).write_text(build_config_yaml())
    marker.write_bytes(orjson.dumps({"parameters": key, "scale": scale, "seed": seed, "counts": asdict(counts)},
                                    option=orjson.OPT_INDENT_2))
    return RehearsalInputs(folder, scale, counts)


def build_config_yaml() -> str:
    """The rehearsal's BuildConfig: default stages, the two sources, the mirror built from the dump."""
    return (
        "# reasonvqa build --config rehearsal.yaml: written by reasonvqa/rehearsal_inputs.py (synthetic facts)\n"
        "sources:\n  - {kind: vg, path: vg}\n  - {kind: gldv2, path: gldv2}\n"
        "knowledge:\n  mirror_entities: entities\n"
        f"release:\n  name: {RELEASE_NAME}\n  version: 0.1.0\n  embed_images: never\n"
    )


# --- WordNet concepts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Concept:
    name: str  # WordNet 3.0 synset name, e.g. clock.n.01
    wn31: str  # 3.1 offset, e.g. 03046257-n
    has_item: bool  # a P8814 item exists (else linking goes through its hypernym, which has one)


def _pick_concepts(rng: np.random.Generator, n: int) -> list[Concept]:
    """``n`` real noun synsets (with a 3.1 offset and a hypernym), 70 % with a P8814 item; the hypernyms of
    the others are added as item concepts, so every concept links (directly or at hypernym depth 1)."""
    by_offset: dict[str, tuple[str, str]] = {}
    rows = []
    with gzip.open(WORDNET_TABLE, "rt", encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            name, wn30, _ili, wn31, hypernyms = (line.rstrip("\n").split("\t") + [""])[:5]
            if wn31:
                by_offset[wn30] = (name, wn31)
                rows.append((name, wn31, hypernyms.split(" ")[0] if hypernyms else ""))
    usable = [r for r in rows if r[2] in by_offset and r[0].endswith(".n.01")]
    picked = rng.choice(len(usable), size=min(n, len(usable)), replace=False)  # seeded order = Zipf rank
    has_item = rng.random(len(picked)) < 0.7
    concepts = [Concept(usable[i][0], usable[i][1], bool(h)) for i, h in zip(picked.tolist(), has_item)]
    with_item = {c.name for c in concepts if c.has_item}
    for i, concept in zip(picked.tolist(), concepts):
        hyper_name, hyper31 = by_offset[usable[i][2]]
        if not concept.has_item and hyper_name not in with_item:
            with_item.add(hyper_name)
            concepts.append(Concept(hyper_name, hyper31, True))
    return [c for c in concepts if c.has_item or c.name not in with_item]


def _lemma(synset: str) -> str:
    return synset.rsplit(".", 2)[0].replace("_", " ")


# --- Visual Genome ------------------------------------------------------------------------------


class _JsonArray:
    """Streams one JSON array to a file, one orjson-encoded element at a time."""

    def __init__(self, path: Path) -> None:
        self.handle: IO[bytes] = path.open("wb")
        self.first = True
        self.handle.write(b"[")

    def add(self, value: Any) -> None:
        self.handle.write(orjson.dumps(value) if self.first else b", " + orjson.dumps(value))
        self.first = False

    def close(self) -> None:
        self.handle.write(b"]")
        self.handle.close()


def _write_vg(folder: Path, rng: np.random.Generator, n_images: int, concepts: list[Concept]) -> tuple[int, int, int]:
    """image_data / objects / attributes / relationships, image by image; (objects, relationships, attributes)."""
    files = {name: _JsonArray(folder / f"{name}.json") for name in ("image_data", "objects", "attributes", "relationships")}
    ranks = np.arange(1, len(concepts) + 1)
    weights = 1.0 / ranks**1.1  # Zipf over the concepts, as VG's object names are
    weights /= weights.sum()
    n_objects = rng.poisson(OBJECTS_PER_IMAGE, n_images).clip(1, None)
    n_relations = rng.poisson(RELATIONS_PER_IMAGE, n_images)
    object_id, relationship_id = 1, 1
    totals = [0, 0, 0]
    for image in range(n_images):
        image_id = image + 1
        width, height = (800, 600) if image % 3 else (500, 375)
        files["image_data"].add({"width": width, "url": f"https://cs.stanford.edu/people/rak248/VG_100K/{image_id}.jpg",
                                 "height": height, "image_id": image_id, "coco_id": None, "flickr_id": None})
        k = int(n_objects[image])
        picks = rng.choice(len(weights), size=k, p=weights)
        xs, ys = rng.integers(0, width - 20, k), rng.integers(0, height - 20, k)
        ws, hs = rng.integers(10, 300, k), rng.integers(10, 300, k)
        no_synset = rng.random(k) < 0.05
        n_attr = np.where(rng.random(k) < 0.45, rng.integers(1, 3, k), 0)
        attr_words = rng.integers(0, len(ATTRIBUTES), (k, 2))
        objects: list[dict[str, Any]] = []
        attributed: list[dict[str, Any]] = []
        for j in range(k):
            concept = concepts[int(picks[j])]
            obj = {"synsets": [] if no_synset[j] else [concept.name], "h": int(min(hs[j], height - ys[j])),
                   "object_id": object_id + j, "names": [_lemma(concept.name)], "w": int(min(ws[j], width - xs[j])),
                   "y": int(ys[j]), "x": int(xs[j])}
            objects.append(obj)
            if n_attr[j]:
                attributed.append({**obj, "attributes": [ATTRIBUTES[a] for a in attr_words[j, : n_attr[j]]]})
                totals[2] += int(n_attr[j])
            else:
                attributed.append(obj)
        object_id += k
        r = int(n_relations[image]) if k > 1 else 0
        subjects, objs = rng.integers(0, k, r), rng.integers(0, k, r)
        predicates = rng.integers(0, len(PREDICATES), r)
        relationships = []
        for j in range(r):
            s, o = objects[int(subjects[j])], objects[int(objs[j])]
            relationships.append({
                "predicate": PREDICATES[predicates[j]], "relationship_id": relationship_id + j, "synsets": [],
                "subject": {"name": s["names"][0], "h": s["h"], "object_id": s["object_id"], "synsets": s["synsets"],
                            "w": s["w"], "y": s["y"], "x": s["x"]},
                "object": {"name": o["names"][0], "h": o["h"], "object_id": o["object_id"], "synsets": o["synsets"],
                           "w": o["w"], "y": o["y"], "x": o["x"]},
            })
        relationship_id += r
        files["objects"].add({"image_id": image_id, "objects": objects})
        files["attributes"].add({"image_id": image_id, "attributes": attributed})
        files["relationships"].add({"relationships": relationships, "image_id": image_id})
        totals[0] += k
        totals[1] += r
    for f in files.values():
        f.close()
    return totals[0], totals[1], totals[2]


# --- GLDv2 --------------------------------------------------------------------------------------


def _landmark_name(i: int) -> str:
    return f"Rehearsal Landmark {i}"


def _write_gldv2(folder: Path, rng: np.random.Generator, n_images: int, n_landmarks: int) -> int:
    """train.csv, train_clean.csv, train_label_to_category.csv; returns the image count."""
    n_images = max(n_images, n_landmarks)
    weights = 1.0 / np.arange(1, n_landmarks + 1) ** 0.8
    extra = rng.choice(n_landmarks, size=n_images - n_landmarks, p=weights / weights.sum())
    landmark_of = rng.permutation(np.concatenate([np.arange(n_landmarks), extra]))
    clean = rng.random(n_images) < 0.4
    by_landmark: dict[int, list[str]] = {}
    with (folder / "train.csv").open("w", encoding="utf-8") as handle:
        handle.write("id,url,landmark_id\n")
        for i, landmark in enumerate(landmark_of.tolist()):
            image_id = hashlib.blake2b(i.to_bytes(8, "little"), digest_size=8).hexdigest()
            handle.write(f"{image_id},https://example.org/rehearsal/{image_id}.jpg,{landmark}\n")
            if clean[i]:
                by_landmark.setdefault(landmark, []).append(image_id)
    with (folder / "train_clean.csv").open("w", encoding="utf-8") as handle:
        handle.write("landmark_id,images\n")
        for landmark in sorted(by_landmark):
            handle.write(f"{landmark},{' '.join(by_landmark[landmark])}\n")
    with (folder / "train_label_to_category.csv").open("w", encoding="utf-8") as handle:
        handle.write("landmark_id,category\n")
        for landmark in range(n_landmarks):
            handle.write(f"{landmark},http://commons.wikimedia.org/wiki/Category:{_landmark_name(landmark).replace(' ', '_')}\n")
    return n_images


# --- the Wikidata dump --------------------------------------------------------------------------


class _Dump:
    """Writes entities as dump JSON lines and counts them."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("wb")
        self.entities = self.statements = 0

    def item(self, qid: int, label: str, claims: dict[str, list[dict]], sitelink: str | None = None) -> None:
        statements = {p: [_statement(qid, p, n, v) for n, v in enumerate(vs)] for p, vs in claims.items() if vs}
        entity = {"id": f"Q{qid}", "type": "item", "modified": MODIFIED,
                  "labels": {"en": {"language": "en", "value": label}}, "claims": statements,
                  "sitelinks": {"commonswiki": {"site": "commonswiki", "title": sitelink}} if sitelink else {}}
        self.handle.write(orjson.dumps(entity) + b"\n")
        self.entities += 1
        self.statements += sum(len(v) for v in statements.values())

    def close(self) -> None:
        self.handle.close()


def _statement(qid: int, pid: str, n: int, value: dict) -> dict:
    snak = {"snaktype": "value", "property": pid, "datatype": value["datatype"], "datavalue": value["datavalue"]}
    statement: dict[str, Any] = {"id": f"Q{qid}${pid}-{n}", "mainsnak": snak, "rank": "normal", "type": "statement"}
    if "qualifiers" in value:
        statement["qualifiers"] = value["qualifiers"]
    return statement


def _item(qid: int) -> dict:
    return {"datatype": "wikibase-item",
            "datavalue": {"type": "wikibase-entityid", "value": {"entity-type": "item", "numeric-id": qid, "id": f"Q{qid}"}}}


def _string(value: str, datatype: str = "string") -> dict:
    return {"datatype": datatype, "datavalue": {"type": "string", "value": value}}


def _time(year: int, month: int = 0, day: int = 0) -> dict:
    precision = 9 if month == 0 else 11
    return {"datatype": "time", "datavalue": {"type": "time", "value": {
        "time": f"+{year:04d}-{month:02d}-{day:02d}T00:00:00Z", "timezone": 0, "before": 0, "after": 0,
        "precision": precision, "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}}}


def _quantity(amount: float, unit: int | None, point_in_time: int | None = None) -> dict:
    value = {"datatype": "quantity", "datavalue": {"type": "quantity", "value": {
        "amount": f"+{amount}", "unit": f"http://www.wikidata.org/entity/Q{unit}" if unit else "1"}}}
    if point_in_time:
        value["qualifiers"] = {"P585": [{"snaktype": "value", "property": "P585", **_time(point_in_time)}]}
    return value


def _write_entities(path: Path, rng: np.random.Generator, sizes: dict[str, int],
                    concepts: list[Concept]) -> tuple[int, int, int]:
    """Every linked item and its neighbourhood to 3 hops; (entities, statements, concept items)."""
    dump = _Dump(path)
    n_city, n_person, n_landmark = sizes["cities"], sizes["people"], sizes["landmarks"]

    def some(share: float) -> bool:
        return bool(rng.random() < share)

    # hop 0/1: landmarks, linked by their Commons sitelink (P373 as well, as on Wikidata)
    for i in range(n_landmark):
        name = _landmark_name(i)
        claims: dict[str, list[dict]] = {
            "P31": [_item(LANDMARK_CLASS + int(rng.integers(0, 60)))] + ([_item(570116)] if some(0.2) else []),
            "P17": [_item(COUNTRY + int(rng.integers(0, N_COUNTRIES)))],
            "P373": [_string(name)],
            "P131": [_item(CITY + int(rng.integers(0, n_city)))] if some(0.6) else [],
            "P571": [_time(int(rng.integers(1000, 2020)))] if some(0.35) else [],
            "P2048": [_quantity(round(float(rng.uniform(5, 400)), 1), 11573)] if some(0.2) else [],
            "P84": [_item(PERSON + int(rng.integers(0, n_person)))] if some(0.1) else [],
            "P186": [_item(MATERIAL + int(rng.integers(0, 30)))] if some(0.1) else [],
        }
        dump.item(LANDMARK + i, name, claims, sitelink=f"Category:{name}")
    # hop 0/1: concepts with a P8814 item
    concept_items = 0
    for i, concept in enumerate(concepts):
        if not concept.has_item:
            continue
        concept_items += 1
        claims = {
            "P8814": [_string(concept.wn31, "external-id")],
            "P279": [_item(CONCEPT_SUPER + int(rng.integers(0, 150)))],
            "P186": [_item(MATERIAL + int(rng.integers(0, 30)))] if some(0.1) else [],
            "P575": [_time(int(rng.integers(1500, 2000)))] if some(0.05) else [],
            "P2067": [_quantity(round(float(rng.uniform(1, 5000)), 1), 11570)] if some(0.1) else [],
            "P61": [_item(PERSON + int(rng.integers(0, n_person)))] if some(0.03) else [],
        }
        dump.item(CONCEPT + i, _lemma(concept.name), claims)
    # hops 2-3: countries, cities, people, and the values' labels
    for i in range(N_COUNTRIES):
        dump.item(COUNTRY + i, f"Country {i}", {
            "P31": [_item(6256)], "P36": [_item(CITY + i % n_city)], "P30": [_item(CONTINENT + int(rng.integers(0, 7)))],
            "P38": [_item(CURRENCY + int(rng.integers(0, 60)))] if some(0.5) else [],
            "P1082": [_quantity(float(rng.integers(100_000, 300_000_000)), None, 2020)]})
    for i in range(n_city):
        dump.item(CITY + i, f"City {i}", {
            "P31": [_item(515)], "P17": [_item(COUNTRY + i % N_COUNTRIES)],
            "P1082": [_quantity(float(rng.integers(1_000, 10_000_000)), None, 2020)]})
    for i in range(n_person):
        dump.item(PERSON + i, f"Person {i}", {
            "P31": [_item(5)], "P27": [_item(COUNTRY + int(rng.integers(0, N_COUNTRIES)))],
            "P569": [_time(int(rng.integers(1700, 1990)), int(rng.integers(1, 13)), int(rng.integers(1, 29)))],
            "P19": [_item(CITY + int(rng.integers(0, n_city)))] if some(0.5) else []})
    for i in range(60):
        qid, _label = LANDMARK_SUPERCLASSES[i % len(LANDMARK_SUPERCLASSES)]
        dump.item(LANDMARK_CLASS + i, f"landmark class {i}", {"P279": [_item(int(qid[1:]))]})
    for i in range(150):
        dump.item(CONCEPT_SUPER + i, f"kind {i}", {"P279": [_item(223557)]})
    for base, prefix, n in ((MATERIAL, "Material", 30), (CURRENCY, "Currency", 60)):
        for i in range(n):
            dump.item(base + i, f"{prefix} {i}", {})
    for i, continent in enumerate(CONTINENTS):
        dump.item(CONTINENT + i, continent, {})
    for qid, label in NAMED_CLASSES:
        dump.item(int(qid[1:]), label, {})
    dump.close()
    return dump.entities, dump.statements, concept_items


def iter_counts(inputs: RehearsalInputs) -> Iterator[tuple[str, int]]:
    """The counts as (name, value) rows, for reports."""
    yield from asdict(inputs.counts).items()
