"""Fold the winning human decisions into the tables of the next release.

Questions: ``wrong`` drops the question; ``edit_answer`` sets the answer (the corrected
answer takes the old answer's place among the choices unless it already is one, in which
case the old, wrong answer stays as a distractor); ``correct`` keeps it as is, and on a hallucination
question makes the review its absence basis (absence_review.py).
Regions: ``reject`` drops the region (and its id from questions' evidence lists);
``edit`` replaces box, mask and area; ``add`` appends a region with origin
``annotation:human``; ``accept`` keeps it. A decision whose question or region is not in
the tables is not used (counted as ``unmatched``); every used decision is listed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import schemas
from reasonvqa.annotation_exports import masks
from reasonvqa.annotation_exports.absence_review import review_bases
from reasonvqa.annotation_exports.decisions import DecisionStore, effective_decisions

DECISIONS_FILE = "annotation_decisions.json"  # written into the release's stats/


@dataclass
class Applied:
    """Tables after the decisions, and which decisions were used."""

    questions: pa.Table
    tables: dict[str, pa.Table]
    used: list[dict] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # decision ids whose target is not in the tables
    store_fingerprint: str | None = None

    def manifest_entry(self) -> dict:
        """What the release manifest lists: the used decision ids and counts per action."""
        actions: dict[str, int] = {}
        for d in self.used:
            actions[d["action"]] = actions.get(d["action"], 0) + 1
        return {"decisions": sorted(d["decision_id"] for d in self.used), "actions": dict(sorted(actions.items())),
                "unmatched": len(self.unmatched), "store": self.store_fingerprint}


def apply_decisions(store: DecisionStore, questions: pa.Table, tables: dict[str, pa.Table] | None = None) -> Applied:
    """Apply the store's winning decisions to ``questions`` (QUESTIONS) and ``tables['regions']``."""
    tables = dict(tables or {})
    winners = effective_decisions(store.decisions())
    used: list[dict] = []
    unmatched: list[str] = []
    question_decisions = {d["question_id"]: d for d in winners.values() if d["target"] == "question"}
    region_decisions = {d["region_id"]: d for d in winners.values() if d["target"] == "region"}

    present = set(questions["question_id"].to_pylist())
    for qid, d in sorted(question_decisions.items()):
        (used if qid in present else unmatched).append(d if qid in present else d["decision_id"])
    questions = review_bases(_apply_to_questions(questions, question_decisions), question_decisions)

    regions = tables.get("regions")
    if region_decisions and regions is None:
        regions = schemas.empty(schemas.REGIONS)
    if regions is not None:
        regions, region_used, region_unmatched = _apply_to_regions(regions, region_decisions)
        used += region_used
        unmatched += region_unmatched
        tables["regions"] = regions
        rejected = {d["region_id"] for d in region_used if d["action"] == "reject"}
        if rejected and "evidence_region_ids" in questions.column_names:
            questions = _drop_evidence(questions, rejected)
    used.sort(key=lambda d: d["decision_id"])
    return Applied(questions=questions, tables=tables, used=used, unmatched=sorted(unmatched))


def _apply_to_questions(questions: pa.Table, decisions: dict[str, dict]) -> pa.Table:
    if not decisions:
        return questions
    ids = questions["question_id"].to_pylist()
    wrong = {q for q, d in decisions.items() if d["action"] == "wrong"}
    edits = {q: d["answer"] for q, d in decisions.items() if d["action"] == "edit_answer"}
    if edits:
        rows = [i for i, q in enumerate(ids) if q in edits]
        answers = questions["answer"].to_pylist()
        choices = questions["choices"].to_pylist() if "choices" in questions.column_names else None
        for i in rows:
            old, new = answers[i], edits[ids[i]]
            answers[i] = new
            if choices is not None and choices[i] is not None and new not in choices[i]:
                choices[i] = [new if c == old else c for c in choices[i]]
        questions = questions.set_column(questions.column_names.index("answer"), "answer",
                                         pa.array(answers, questions.schema.field("answer").type))
        if choices is not None:
            questions = questions.set_column(questions.column_names.index("choices"), "choices",
                                             pa.array(choices, questions.schema.field("choices").type))
    if wrong:
        questions = questions.filter(pc.invert(pc.is_in(questions["question_id"], pa.array(sorted(wrong)))))
    return questions


def _apply_to_regions(regions: pa.Table, decisions: dict[str, dict]) -> tuple[pa.Table, list[dict], list[str]]:
    present = set(regions["region_id"].to_pylist())
    used = [d for r, d in sorted(decisions.items()) if r in present or d["action"] == "add"]
    unmatched = [d["decision_id"] for r, d in sorted(decisions.items()) if r not in present and d["action"] != "add"]
    drop = {d["region_id"] for d in used if d["action"] in ("reject", "edit")}
    drop |= {d["region_id"] for d in used if d["action"] == "add" and d["region_id"] in present}
    kept = regions.filter(pc.invert(pc.is_in(regions["region_id"], pa.array(sorted(drop), pa.string())))) if drop else regions
    old = {r["region_id"]: r for r in regions.filter(pc.is_in(regions["region_id"], pa.array(sorted(drop), pa.string()))).to_pylist()} if drop else {}
    new_rows = []
    for d in used:
        if d["action"] == "edit":
            new_rows.append(_edited_row(old[d["region_id"]], d))
        elif d["action"] == "add":
            new_rows.append(_added_row(d))
    if new_rows:
        conformed = schemas.conform(kept, schemas.REGIONS) if kept.schema != schemas.REGIONS else kept
        extra = [c for c in kept.column_names if c not in schemas.REGIONS.names]
        if extra:  # columns another release schema adds (kept as nulls on the new rows)
            conformed = kept
        added = pa.Table.from_pylist([{c: row.get(c) for c in conformed.column_names} for row in new_rows],
                                     schema=conformed.schema)
        kept = pa.concat_tables([conformed, added])
    return kept.sort_by([("region_id", "ascending")]), used, unmatched


def _geometry_columns(d: dict) -> dict:
    mask = d["mask"]
    if mask is not None:
        area, box = masks.coco_area_and_box(mask)
    else:
        box = d["box"]
        area = box[2] * box[3]
    return {"x": box[0], "y": box[1], "w": box[2], "h": box[3], "mask": mask, "area": area}


def _edited_row(row: dict, d: dict) -> dict:
    extra = json.loads(row["extra"]) if row.get("extra") else {}
    extra["annotation"] = {"decision_id": d["decision_id"], "action": "edit", "annotator": d["annotator"]}
    return {**row, **_geometry_columns(d), "label": d["label"] or row.get("label"),
            "extra": json.dumps(extra, sort_keys=True)}


def _added_row(d: dict) -> dict:
    extra = {"annotation": {"decision_id": d["decision_id"], "action": "add", "annotator": d["annotator"]}}
    return {"region_id": d["region_id"], "image_id": d["image_id"], "label": d["label"], **_geometry_columns(d),
            "origin": "annotation:human", "extra": json.dumps(extra, sort_keys=True)}


def _drop_evidence(questions: pa.Table, rejected: set[str]) -> pa.Table:
    column = questions["evidence_region_ids"].to_pylist()
    cleaned = [None if ids is None else [r for r in ids if r not in rejected] for ids in column]
    index = questions.column_names.index("evidence_region_ids")
    return questions.set_column(index, "evidence_region_ids", pa.array(cleaned, questions.schema.field(index).type))


def write_decisions_file(applied: Applied, stats_dir: Path) -> Path:
    """The used decisions in full (sorted, canonical JSON) as ``stats/annotation_decisions.json``."""
    stats_dir.mkdir(parents=True, exist_ok=True)
    path = stats_dir / DECISIONS_FILE
    path.write_text(json.dumps({"used": applied.used, "unmatched": applied.unmatched}, sort_keys=True, indent=1) + "\n",
                    encoding="utf-8")
    return path


def apply_store(store_dir: Path | str | None, questions: pa.Table,
                tables: dict[str, pa.Table] | None) -> tuple[pa.Table, dict[str, pa.Table], Applied | None]:
    """The build/resplit hook: no store -> the tables unchanged and None; else the tables with the
    store's decisions applied, and what was applied (``Applied.manifest_entry``, ``write_decisions_file``)."""
    if store_dir is None:
        return questions, dict(tables or {}), None
    store = DecisionStore(Path(store_dir))
    if not store.root.is_dir():
        raise FileNotFoundError(f"annotation decision store {store.root} does not exist")
    applied = apply_decisions(store, questions, tables)
    applied.store_fingerprint = store.fingerprint()
    return applied.questions, applied.tables, applied


def record_tables(release: Path, manifest: dict) -> dict[str, pa.Table]:
    """The record tables (e.g. regions) a release lists in its manifest, read whole; the images table (which
    may hold the images' bytes) as a ``ReleaseImages`` that streams it when written."""
    from reasonvqa.tasks.release.embed import ReleaseImages
    from reasonvqa.tasks.release.reader import read_split

    return {name: ReleaseImages(Path(release)) if name == "images" else read_split(Path(release), name, schemas.TABLES[name])
            for name in manifest.get("tables", [])}
