"""A synthetic build's inputs to question generation at any scale, shared by the tests and the benchmarks.

``make_synthetic(folder, scale)`` writes images, objects, relations, entity links and facts as Parquet
(the record model): at scale 1, 450K landmark photos of 150K landmarks and 150K Visual Genome-like
scenes of 20 objects over 2,000 concept items, with countries, cities and people reached at hops 2-3;
``load_synthetic`` reads them back. Used by benchmarks/bench_generation.py and tests/tasks/balance/test_bias.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

TABLES = ("images", "objects", "relations", "links", "facts")

CONTINENTS = ["Africa", "Antarctica", "Asia", "Europe", "North America", "South America", "Oceania"]
PREDICATES = ["on", "has", "wearing", "next to", "holding", "in", "behind", "parked on", "near", "of", "in front of",
              "above", "under", "holds", "sitting on", "standing on", "beside", "along", "covering", "with"]


def make_synthetic(folder: Path, scale: float = 1.0, seed: int = 0) -> None:
    """Write the synthetic tables (skipped when they exist for this scale)."""
    marker = folder / f"done-{scale}"
    if marker.exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("done-*"):
        old.unlink()
    rng = np.random.default_rng(seed)
    n_country, n_city, n_person = 200, 20_000, 20_000
    n_landmark, n_concept = int(150_000 * scale), 2_000
    n_gld, n_vg = int(450_000 * scale), int(150_000 * scale)
    country = [f"Q{1_000_000 + i}" for i in range(n_country)]
    city = [f"Q{2_000_000 + i}" for i in range(n_city)]
    person = [f"Q{3_000_000 + i}" for i in range(n_person)]
    landmark = [f"Q{4_000_000 + i}" for i in range(n_landmark)]
    concept = [f"Q{5_000_000 + i}" for i in range(n_concept)]
    facts = _Facts(rng)

    # hop 1: landmarks
    classes = [f"landmark class {i}" for i in range(60)]
    facts.item(landmark, "P31", rng.integers(0, 60, n_landmark), [f"Q{6_000_000 + i}" for i in range(60)], classes, 1)
    some = rng.random(n_landmark) < 0.2  # a second, vague instance-of
    facts.item(np.array(landmark)[some], "P31", np.zeros(some.sum(), int), ["Q570116"], ["tourist attraction"], 1)
    facts.item(landmark, "P17", rng.integers(0, n_country, n_landmark), country, _labels("Country", n_country), 1)
    facts.item_share(landmark, 0.1, "P131", n_city, city, _labels("City", n_city), 1)
    facts.time_share(landmark, 0.35, "P571", 1000, 2020, 9, 1)
    facts.quantity_share(landmark, 0.2, "P2048", 5, 400, "Q11573", "metre", 1)
    facts.item_share(landmark, 0.1, "P84", n_person, person, _labels("Person", n_person), 1)
    materials = _labels("Material", 30)
    mat_ids = [f"Q{7_000_000 + i}" for i in range(30)]
    facts.item_share(landmark, 0.1, "P186", 30, mat_ids, materials, 1, second=0.3)
    # hop 1: Visual Genome concepts
    supers = [f"Q{6_100_000 + i}" for i in range(150)]
    facts.item(concept, "P279", rng.integers(0, 150, n_concept), supers, _labels("kind", 150), 1)
    facts.item_share(concept, 0.03, "P61", n_person, person, _labels("Person", n_person), 1)
    facts.time_share(concept, 0.05, "P575", 1500, 2000, 9, 1)
    facts.item_share(concept, 0.1, "P186", 30, mat_ids, materials, 1, second=0.3)
    facts.quantity_share(concept, 0.1, "P2067", 1, 5000, "Q11570", "kilogram", 1)
    # hops 2-3: countries, cities, people
    facts.item(country, "P36", np.arange(n_country), city, _labels("City", n_city), 2)
    facts.item(country, "P30", rng.integers(0, 7, n_country), [f"Q{8_000_000 + i}" for i in range(7)], CONTINENTS, 2)
    facts.item_share(country, 0.5, "P38", 60, [f"Q{8_100_000 + i}" for i in range(60)], _labels("Currency", 60), 2)
    # populations carry their P585 point in time, as Wikidata's do (a time-varying property needs it)
    facts.quantity_share(country, 1.0, "P1082", 100_000, 300_000_000, None, None, 2, "+2020-01-01T00:00:00Z")
    facts.item(city, "P17", np.arange(n_city) % n_country, country, _labels("Country", n_country), 3)
    facts.quantity_share(city, 1.0, "P1082", 1_000, 10_000_000, None, None, 3, "+2020-01-01T00:00:00Z")
    facts.time_share(person, 1.0, "P569", 1700, 1990, 11, 2)
    facts.item(person, "P27", rng.integers(0, n_country, n_person), country, _labels("Country", n_country), 2)
    facts.item_share(person, 0.5, "P19", n_city, city, _labels("City", n_city), 2)
    # typing facts that template subject types check (classes as in templates/classes.yaml; chains at hop 4)
    facts.item(country, "P31", np.zeros(n_country, int), ["Q6256"], ["country"], 2)
    facts.item(city, "P31", np.zeros(n_city, int), ["Q515"], ["city"], 3)
    facts.item(person, "P31", np.zeros(n_person, int), ["Q5"], ["human"], 2)
    landmark_classes = [f"Q{6_000_000 + i}" for i in range(60)]
    facts.item(landmark_classes, "P279", np.arange(60) % 3, ["Q41176", "Q12518", "Q8502"], ["building", "tower", "mountain"], 4)
    facts.item(supers, "P279", np.zeros(150, int), ["Q223557"], ["physical object"], 4)
    pq.write_table(facts.table(), folder / "facts.parquet")

    # images, objects, relations, links
    gld_ids = [f"gldv2:{i:016x}" for i in range(n_gld)]
    vg_ids = [f"vg:{i + 1}" for i in range(n_vg)]
    images = pl.DataFrame({"image_id": gld_ids + vg_ids, "source": ["gldv2"] * n_gld + ["vg"] * n_vg})
    per = 20
    obj_image = np.repeat(np.arange(n_vg), per)
    obj_concept = np.minimum(rng.zipf(1.3, n_vg * per) - 1, n_concept - 1)
    vg_objects = pl.DataFrame({"img": obj_image, "concept": obj_concept, "n": np.arange(n_vg * per)}).with_columns(
        image_id=pl.format("vg:{}", pl.col("img") + 1), object_id=pl.format("vg:{}/o{}", pl.col("img") + 1, pl.col("n")),
        label=pl.format("obj {}", pl.col("concept")),
    )
    gld_objects = pl.DataFrame({"image_id": gld_ids}).with_columns(
        object_id=pl.col("image_id") + "/o0", label=pl.lit("landmark photo")
    )
    objects = pl.concat([gld_objects.select("object_id", "image_id", "label"), vg_objects.select("object_id", "image_id", "label")])
    linked = vg_objects.filter(pl.col("concept") < int(n_concept * 0.7))
    links = pl.concat([
        gld_objects.select("object_id", "image_id", qid=pl.Series([landmark[i % n_landmark] for i in range(n_gld)]),
                           method=pl.lit("commons:p373"), synset=pl.lit(None, pl.String)),
        linked.select("object_id", "image_id", qid=pl.format("Q{}", pl.col("concept") + 5_000_000),
                      method=pl.lit("wordnet:p8814"), synset=pl.format("thing{}.n.01", pl.col("concept"))),
    ])
    n_rel = 6
    rel_image = np.repeat(np.arange(n_vg), n_rel)
    subj = rel_image * per + rng.integers(0, per, n_vg * n_rel)
    obj = rel_image * per + rng.integers(0, per, n_vg * n_rel)
    relations = pl.DataFrame({"img": rel_image, "s": subj, "o": obj, "k": np.arange(n_vg * n_rel),
                              "predicate": np.array(PREDICATES)[rng.integers(0, len(PREDICATES), n_vg * n_rel)],
                              "oc": obj_concept[obj]}).select(
        relation_id=pl.format("vg:{}/r{}", pl.col("img") + 1, pl.col("k")), image_id=pl.format("vg:{}", pl.col("img") + 1),
        subject_id=pl.format("vg:{}/o{}", pl.col("img") + 1, pl.col("s")),
        object_id=pl.format("vg:{}/o{}", pl.col("img") + 1, pl.col("o")), predicate="predicate",
        object_label=pl.format("obj {}", pl.col("oc")),
    )
    for name, df in (("images", images), ("objects", objects), ("relations", relations), ("links", links)):
        df.sort("image_id").write_parquet(folder / f"{name}.parquet")
    marker.write_text("")


def _labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix} {i}" for i in range(n)]


class _Facts:
    """Accumulates fact columns (schemas.FACTS) for the synthetic knowledge."""

    def __init__(self, rng):
        self.rng, self.parts = rng, []

    def _add(self, subjects, pid, hop, **cols):
        n = len(subjects)
        base = {"subject_qid": list(subjects), "subject_label": [None] * n, "property_id": [pid] * n, "hop": [hop] * n,
                "rank": ["normal"] * n}
        self.parts.append(pl.DataFrame({**base, **cols}, strict=False))

    def item(self, subjects, pid, idx, qids, labels, hop):
        qids, labels = np.array(qids), np.array(labels)
        self._add(subjects, pid, hop, value_type=["item"] * len(subjects), value_qid=qids[idx].tolist(),
                  value_label=labels[idx].tolist())

    def item_share(self, subjects, share, pid, n_values, qids, labels, hop, second=0.0):
        subjects = np.array(subjects)
        chosen = subjects[self.rng.random(len(subjects)) < share]
        self.item(chosen, pid, self.rng.integers(0, n_values, len(chosen)), qids, labels, hop)
        twice = chosen[self.rng.random(len(chosen)) < second]
        self.item(twice, pid, self.rng.integers(0, n_values, len(twice)), qids, labels, hop)

    def time_share(self, subjects, share, pid, lo, hi, precision, hop):
        subjects = np.array(subjects)
        chosen = subjects[self.rng.random(len(subjects)) < share]
        years = self.rng.integers(lo, hi, len(chosen))
        if precision == 9:
            times = [f"+{y:04d}-00-00T00:00:00Z" for y in years]
        else:
            days = self.rng.integers(1, 29, len(chosen))
            months = self.rng.integers(1, 13, len(chosen))
            times = [f"+{y:04d}-{m:02d}-{d:02d}T00:00:00Z" for y, m, d in zip(years, months, days)]
        self._add(chosen, pid, hop, value_type=["time"] * len(chosen), time=times, precision=[precision] * len(chosen))

    def quantity_share(self, subjects, share, pid, lo, hi, unit, unit_label, hop, point_in_time=None):
        subjects = np.array(subjects)
        chosen = subjects[self.rng.random(len(subjects)) < share]
        amounts = np.round(self.rng.uniform(lo, hi, len(chosen)), 1 if hi < 10_000 else 0)
        self._add(chosen, pid, hop, value_type=["quantity"] * len(chosen), amount=amounts.tolist(),
                  unit_qid=[unit] * len(chosen), unit_label=[unit_label] * len(chosen),
                  point_in_time=[point_in_time] * len(chosen))

    def table(self) -> pa.Table:
        from reasonvqa import schemas

        return _with_schema(pl.concat(self.parts, how="diagonal_relaxed").to_arrow(), schemas.FACTS)


def _with_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Add the schema's missing columns as nulls and cast to it."""
    from reasonvqa import schemas

    for f in schema:
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
    return schemas.conform(table, schema)


def load_synthetic(folder: Path) -> dict[str, pa.Table]:
    """The tables ``make_synthetic`` wrote, in the record model's schemas."""
    from reasonvqa import schemas

    tables = {name: pq.read_table(folder / f"{name}.parquet") for name in TABLES}
    for name, schema in (("images", schemas.IMAGES), ("objects", schemas.OBJECTS), ("relations", schemas.RELATIONS),
                         ("links", schemas.ENTITY_LINKS)):
        tables[name] = _with_schema(tables[name], schema)
    return tables
