"""Impossible-relation hallucination questions (VistaQA 3.2 "invalid spatial relations", GroundingME 3.2).

"What color is the cup under the table?" -> "No cup is under the table in the image.", where the
cup and the table are both present and named unambiguously, and the relation cannot hold:

1. Subject A has a label no other region of the image has (so "no cup" speaks of every cup);
   object B is any nameable labeled region (grounded.references); A and B are not duplicate boxes.
2. Predicates asked: those used between the same two labels in other images of the corpus
   (``corpus_relation_counts`` over the build, most images first), then the spatial ones the boxes refute
   ("to the left of" when A lies right of B). Only predicates of templates/grounded/relations.yaml.
3. Forms (``relation_forms``): "How many cups are under the table?" or "What color is the cup under the
   table?", the forms relation_questions.py asks about annotated relations.
4. A candidate is rejected ``relation_present`` when an annotated relation between A and B (or
   boxes that duplicate them) has the asked family, or its inverse from B to A ("cup on table" is
   "table below cup"); ``relation_not_refuted`` unless the boxes refute the asked family by the
   spatial margin (grounded.spatial_answer) or an annotated relation of an excluded family holds
   (annotated "on" vs asked "under"). Visual Genome relations are incomplete, so absence of an
   annotation alone never makes a question. What refuted it is the row's ``absence_basis``:
   ``refuting_boxes`` (checked first) or ``annotated_relation``.
5. At most one kept question per pair, ``hallucination_candidates_per_image`` per image; corpus
   predicates of every pair are examined before the spatial fallbacks of any pair.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa.yaml_files import load_yaml
from reasonvqa.paths import TEMPLATES_DIR
from reasonvqa.tasks.questions.grounded import (Candidate, be, countable, pick_form, plural, singular, spatial_answer,
                                                stable_order)
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.regions import Region, iou_matrix, object_region_id

RELATIONS_FILE = TEMPLATES_DIR / "grounded" / "relations.yaml"
TEMPLATE_ID = "hallucination:impossible_relation"
_REFUTING_ANSWER = {"above": "below", "below": "above", "left": "right", "right": "left"}
_SPATIAL_FALLBACK = {"below": "above", "above": "below", "right": "to the left of", "left": "to the right of"}


@dataclass(frozen=True)
class Family:
    name: str
    ask: tuple[str, ...]
    geometry: str
    inverse: str | None
    excludes: tuple[str, ...]


def normalize_predicate(text: str | None) -> str:
    """Lower case, single spaces ("Parked  ON" -> "parked on")."""
    return " ".join(re.findall(r"[a-z0-9']+", (text or "").lower()))


@lru_cache(maxsize=1)
def families() -> dict[str, Family]:
    """family name -> Family, from templates/grounded/relations.yaml."""
    data = load_yaml(RELATIONS_FILE.read_text(encoding="utf-8"))
    return {name: Family(name, tuple(spec["ask"]), spec["geometry"], spec.get("inverse"), tuple(spec.get("excludes") or ()))
            for name, spec in sorted(data.items())}


@lru_cache(maxsize=1)
def predicate_families() -> dict[str, str]:
    """predicate (asked or also) -> its family."""
    data = load_yaml(RELATIONS_FILE.read_text(encoding="utf-8"))
    out = {}
    for name, spec in sorted(data.items()):
        for p in list(spec["ask"]) + list(spec.get("also") or []):
            out[normalize_predicate(p)] = name
    return out


@lru_cache(maxsize=1)
def askable() -> dict[str, str]:
    """predicate a question may use -> its family."""
    return {normalize_predicate(p): f.name for f in families().values() for p in f.ask}


CORPUS_COLUMNS = ("subject_label", "object_label", "predicate", "images")


def corpus_relation_counts(relations: list[pa.Table]) -> pa.Table:
    """(subject_label, object_label, predicate, images): in how many images each askable predicate joins two labels."""
    frames = [cast(pl.DataFrame, pl.from_arrow(t.select(["image_id", "subject_label", "predicate", "object_label"])))
              for t in relations if t.num_rows]
    if not frames:
        return pa.table({c: pa.array([], pa.int64() if c == "images" else pa.string()) for c in CORPUS_COLUMNS})
    frame = pl.concat(frames).with_columns(
        subject_label=pl.col("subject_label").str.strip_chars().str.to_lowercase(),
        object_label=pl.col("object_label").str.strip_chars().str.to_lowercase(),
        predicate=pl.col("predicate").str.to_lowercase().str.replace_all(r"[^a-z0-9']+", " ").str.strip_chars())
    counts = (frame.filter(pl.col("predicate").is_in(list(askable())) & (pl.col("subject_label") != "")
                           & (pl.col("object_label") != ""))
              .unique(["image_id", "subject_label", "object_label", "predicate"])
              .group_by("subject_label", "object_label", "predicate").agg(images=pl.len())
              .sort("subject_label", "object_label", "predicate"))
    return counts.with_columns(pl.col("images").cast(pl.Int64)).to_arrow()


def predicate_index(corpus: pa.Table | None, labels: set[str]) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(subject label, object label) -> [(predicate, images)] of the corpus rows whose subject is in ``labels``."""
    if corpus is None or corpus.num_rows == 0:
        return {}
    rows = corpus.filter(pc.is_in(corpus["subject_label"], pa.array(sorted(labels), pa.string())))
    out: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for s, o, p, n in zip(*(rows[c].to_pylist() for c in CORPUS_COLUMNS)):
        out.setdefault((s, o), []).append((p, n))
    return out


def predicates_elsewhere(index: dict[tuple[str, str], list[tuple[str, int]]], own: set[tuple[str, str, str]],
                         subject: str, obj: str) -> list[str]:
    """Askable predicates between the two labels in other images than this one (``own``: its (s, p, o)), most first."""
    found = [(n - ((subject, p, obj) in own), p) for p, n in index.get((subject, obj), [])]
    return [p for n, p in sorted(found, key=lambda t: (-t[0], t[1])) if n > 0]


def own_triples(relations: list[dict]) -> set[tuple[str, str, str]]:
    """(subject label, predicate, object label) of one image's relations, normalized."""
    return {((r["subject_label"] or "").strip().lower(), normalize_predicate(r["predicate"]),
             (r["object_label"] or "").strip().lower()) for r in relations}


def annotated_families(relations: list[dict], region_of: dict[str, str]) -> set[tuple[str, str, str]]:
    """(subject region, object region, family) of the annotated relations, with the inverse from object to subject."""
    fam_of, fams = predicate_families(), families()
    out = set()
    for r in relations:
        family = fam_of.get(normalize_predicate(r["predicate"]))
        a, b = region_of.get(r["subject_id"]), region_of.get(r["object_id"])
        if family is None or a is None or b is None:
            continue
        out.add((a, b, family))
        inverse = fams[family].inverse
        if inverse:
            out.add((b, a, inverse))
    return out


def geometry_refutes(family: Family, a: Region, b: Region, image: dict, config: GroundedConfig) -> bool:
    """True when the boxes show that ``family`` cannot hold from ``a`` to ``b`` (by the spatial margin)."""
    width, height = image.get("width") or 0, image.get("height") or 0
    if family.geometry in ("above", "below"):
        return spatial_answer(a, b, "vertical", width, height, config) == _REFUTING_ANSWER[family.geometry]
    if family.geometry in ("left", "right"):
        return spatial_answer(a, b, "horizontal", width, height, config) == _REFUTING_ANSWER[family.geometry]
    if family.geometry == "contact":
        return any(spatial_answer(a, b, axis, width, height, config) is not None for axis in ("horizontal", "vertical"))
    return False


def relation_forms(a: str, predicate: str, b_ref: str) -> list[tuple[str, str, str]]:
    """(task type, form, question) forms about "the <a> <predicate> <b>": the forms real relation questions take
    too (relation_questions.py), so the wording does not tell an impossible relation from an annotated one."""
    counting = [("counting", "relation_count", f"How many {plural(a)} are {predicate} {b_ref}?")] if countable(a) else []
    return counting + [("attribute", "relation_color", f"What color {be(a)} the {a} {predicate} {b_ref}?")]


def relation_candidates(image_id: str, regions: list[Region], refs: dict[str, str], relations: list[dict],
                        index: dict[tuple[str, str], list[tuple[str, int]]], image: dict,
                        config: GroundedConfig, weights: dict[str, int] | None = None) -> list[Candidate]:
    """Impossible-relation hallucination candidates of one image (kept ones and rejects)."""
    if config.hallucination_candidates_per_image == 0:
        return []
    labeled = [r for r in regions if r.label]
    label_count: dict[str, int] = {}
    for r in labeled:
        label_count[singular(r.label)] = label_count.get(singular(r.label), 0) + 1
    subjects = [r for r in labeled if label_count[singular(r.label)] == 1 and refs.get(r.region_id) == f"the {r.label}"]
    objects = [r for r in labeled if r.region_id in refs]
    region_ids = {r.region_id for r in regions}
    region_of = {oid: object_region_id(oid) for r in relations for oid in (r["subject_id"], r["object_id"])
                 if object_region_id(oid) in region_ids}
    annotated: dict[tuple[str, str], set[str]] = {}
    for s_, o_, f_ in annotated_families(relations, region_of):
        annotated.setdefault((s_, o_), set()).add(f_)
    duplicate = iou_matrix(labeled) >= config.duplicate_iou
    aliases = {r.region_id: {labeled[j].region_id for j in np.flatnonzero(row)} | {r.region_id}
               for r, row in zip(labeled, duplicate)}
    own = own_triples(relations)
    fams, ask = families(), askable()
    pairs = sorted(((a, b) for a in subjects for b in objects if b.label != a.label and b.region_id not in aliases[a.region_id]),
                   key=lambda p: stable_order(p[0].region_id, p[1].region_id, "relation"))

    def examine(a: Region, b: Region, predicates: list[str]) -> bool:
        """Candidates for ``predicates`` in order until one is kept; True when one was."""
        assert a.label is not None  # pairs are of labeled regions
        held = set().union(*(annotated.get((x, y), ()) for x in aliases[a.region_id] for y in aliases[b.region_id]))
        b_ref = refs[b.region_id]
        for predicate in predicates:
            family = fams[ask[predicate]]
            options = [f for f in relation_forms(a.label, predicate, b_ref) if f[0] in config.task_types]
            if not options:
                return False
            task, form, question = pick_form(options, weights, image_id, a.region_id, b.region_id, predicate, "form")
            c = Candidate(image_id, task, question, f"No {a.label} {be(a.label)} {predicate} {b_ref} in the image.", [],
                          is_hallucination=True, template_id=TEMPLATE_ID,
                          detail={"subject": a.region_id, "object": b.region_id, "predicate": predicate}, form=form)
            contrary = sorted(held & set(family.excludes))
            if family.name in held:
                c.reason = "relation_present"
            elif geometry_refutes(family, a, b, image, config):
                c.detail.update(absence_basis="refuting_boxes", absence_evidence={
                    "subject": a.region_id, "object": b.region_id, "geometry": family.geometry,
                    "margin": config.spatial_margin})
            elif contrary:
                c.detail.update(absence_basis="annotated_relation", absence_evidence={
                    "subject": a.region_id, "object": b.region_id, "annotated_families": contrary})
            else:
                c.reason = "relation_not_refuted"
            out.append(c)
            if c.reason is None:
                return True
        return False

    out: list[Candidate] = []
    kept: set[tuple[str, str]] = set()
    # corpus predicates first (plausible in this scene), then spatial ones the boxes refute
    for a, b in pairs:
        assert a.label is not None and b.label is not None  # pairs are of labeled regions
        if len(kept) < config.hallucination_candidates_per_image and examine(a, b, predicates_elsewhere(index, own, a.label, b.label)):
            kept.add((a.region_id, b.region_id))
    for a, b in pairs:
        if len(kept) >= config.hallucination_candidates_per_image:
            break
        if (a.region_id, b.region_id) in kept:
            continue
        assert a.label is not None and b.label is not None  # pairs are of labeled regions
        tried = set(predicates_elsewhere(index, own, a.label, b.label))
        fallback = sorted((p for g in ("above", "below", "left", "right") if (p := _SPATIAL_FALLBACK[g]) not in tried
                           and geometry_refutes(fams[ask[p]], a, b, image, config)),
                          key=lambda p: stable_order(a.region_id, b.region_id, p))
        if examine(a, b, fallback[:1]):
            kept.add((a.region_id, b.region_id))
    return out
