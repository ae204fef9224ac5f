"""Fold the winning human decisions into the tables of the next release.

Questions: ``wrong`` drops the question; ``edit_answer`` sets the answer (import admits only
one of the question's choices, so the choices stay as they are and the old, wrong answer becomes
a distractor); ``correct`` keeps it as is, and on a hallucination
question makes the review its absence basis (absence_review.py).
Regions: ``reject`` drops the region (and its id from questions' evidence lists);
``edit`` replaces box, mask and area; ``add`` appends a region with origin
``annotation:human``; ``accept`` keeps it. A decision whose question or region is not in
the tables is not used (counted as ``unmatched``); every used decision is listed.

Every release invariant holds after the decisions (``_grounded_evidence``): a counting question's
answer is the number of its evidence regions, so a corrected count is applied together with the
regions the reviewer drew in its task (or rejected), or the question is set aside ("count edited
without evidence"), listed with its reason under ``set_aside`` in ``stats/annotation_decisions.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import masks, schemas
from reasonvqa.annotation_exports.absence_review import review_bases
from reasonvqa.annotation_exports.decisions import DecisionStore, effective_decisions
from reasonvqa.schemas import GROUNDED_KINDS

DECISIONS_FILE = "annotation_decisions.json"  # written into the release's stats/


@dataclass
class Applied:
    """Tables after the decisions, and which decisions were used."""

    questions: pa.Table
    tables: dict[str, pa.Table]
    used: list[dict] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # decision ids whose target is not in the tables
    store_fingerprint: str | None = None
    set_aside: list[dict] = field(default_factory=list)  # {"question_id", "reason", "decision_id"}: left out, see module doc

    def manifest_entry(self) -> dict:
        """What the release manifest lists: the used decision ids and counts per action."""
        actions: dict[str, int] = {}
        for d in self.used:
            actions[d["action"]] = actions.get(d["action"], 0) + 1
        entry = {"decisions": sorted(d["decision_id"] for d in self.used), "actions": dict(sorted(actions.items())),
                 "unmatched": len(self.unmatched), "store": self.store_fingerprint}
        if self.set_aside:  # absent when none: releases that set nothing aside keep their bytes
            entry["set_aside"] = len(self.set_aside)
        return entry


def apply_decisions(store: DecisionStore, questions: pa.Table, tables: dict[str, pa.Table] | None = None) -> Applied:
    """Apply the store's winning decisions to ``questions`` (QUESTIONS) and ``tables['regions']``."""
    tables = dict(tables or {})
    winners = effective_decisions(store.decisions())
    used: list[dict] = []
    unmatched: list[str] = []
    question_decisions = {d["question_id"]: d for d in winners.values() if d["target"] == "question"}
    region_decisions = {d["region_id"]: d for d in winners.values() if d["target"] == "region"}

    present = set(questions["question_id"].to_pylist())
    regions = tables.get("regions")
    if region_decisions and regions is None:
        regions = schemas.empty(schemas.REGIONS)
    region_used: list[dict] = []
    if regions is not None:
        regions, region_used, region_unmatched = _apply_to_regions(regions, region_decisions)
        unmatched += region_unmatched
        tables["regions"] = regions
    questions, set_aside = _grounded_evidence(questions, question_decisions, region_used)
    questions, outside = _answers_outside_choices(questions, question_decisions)
    set_aside = sorted(set_aside + outside, key=lambda a: a["question_id"])
    aside_ids = {a["question_id"] for a in set_aside}
    for qid, d in sorted(question_decisions.items()):
        if qid in present and qid not in aside_ids:
            used.append(d)
        elif qid not in present:
            unmatched.append(d["decision_id"])
    kept = {q: d for q, d in question_decisions.items() if q not in aside_ids}
    questions = review_bases(_apply_to_questions(questions, kept), kept)
    used += region_used
    used.sort(key=lambda d: d["decision_id"])
    return Applied(questions=questions, tables=tables, used=used, unmatched=sorted(unmatched), set_aside=set_aside)


def _grounded_evidence(questions: pa.Table, question_decisions: dict[str, dict],
                       region_used: list[dict]) -> tuple[pa.Table, list[dict]]:
    """Questions' evidence after the region decisions, and the questions set aside because the release
    invariants would break (verify_regions): rejected regions leave the evidence lists; a counting
    question (grounded, not a hallucination) counts the regions of its evidence, so its evidence
    gains the regions the reviewer drew in its task, and its answer (corrected or not) must be their
    number, else it is set aside ("count edited without evidence" when the count was corrected,
    "evidence edited without the count" when only regions changed); another grounded question whose
    every evidence region was rejected is set aside ("every evidence region rejected")."""
    if "evidence_region_ids" not in questions.column_names:
        return questions, []
    rejected = {d["region_id"] for d in region_used if d["action"] == "reject"}
    drawn: dict[str, list[str]] = {}
    for d in region_used:
        if d["action"] == "add":
            drawn.setdefault(d["item_id"], []).append(d["region_id"])
    edited = {q for q, d in question_decisions.items() if d["action"] == "edit_answer"}
    ids = questions["question_id"].to_pylist()
    evidence = questions["evidence_region_ids"].to_pylist()
    touched = [i for i, (q, ev) in enumerate(zip(ids, evidence))
               if q in edited or q in drawn or (ev and rejected.intersection(ev))]
    if not touched:
        return questions, []
    def column(name: str) -> list:
        return questions[name].to_pylist() if name in questions.column_names else [None] * questions.num_rows
    kind, task_type, halluc, answer = column("kind"), column("task_type"), column("is_hallucination"), column("answer")
    set_aside: list[dict] = []
    for i in touched:
        q, old = ids[i], evidence[i] or []
        if q in question_decisions and question_decisions[q]["action"] == "wrong":
            continue  # dropped anyway
        if kind[i] not in GROUNDED_KINDS or halluc[i]:
            evidence[i] = [r for r in old if r not in rejected] if evidence[i] is not None else None
            continue
        new = [r for r in old if r not in rejected]
        if kind[i] == "grounded" and task_type[i] == "counting":
            new += [r for r in sorted(drawn.get(q, [])) if r not in new]
            decided = question_decisions.get(q)
            count = question_decisions[q]["answer"] if q in edited else answer[i]
            if count != str(len(new)):
                reason = "count edited without evidence" if q in edited else "evidence edited without the count"
                set_aside.append({"question_id": q, "reason": reason, "decision_id": decided["decision_id"] if decided else None,
                                  "answer": count, "evidence_regions": len(new)})
                continue
        elif old and not new:
            set_aside.append({"question_id": q, "reason": "every evidence region rejected", "decision_id": None,
                              "answer": answer[i], "evidence_regions": 0})
            continue
        evidence[i] = new
    index = questions.column_names.index("evidence_region_ids")
    questions = questions.set_column(index, "evidence_region_ids", pa.array(evidence, questions.schema.field(index).type))
    if set_aside:
        aside = pa.array(sorted(a["question_id"] for a in set_aside))
        questions = questions.filter(pc.invert(pc.is_in(questions["question_id"], aside)))
    return questions, sorted(set_aside, key=lambda a: a["question_id"])


def _answers_outside_choices(questions: pa.Table, question_decisions: dict[str, dict]) -> tuple[pa.Table, list[dict]]:
    """Questions set aside because a corrected answer is not one of their choices ("answer edited outside the
    choices"): import refuses such a decision (importing.check_values), but a store filled before it did may
    hold one, and applying it would break the release's answer-among-choices invariant."""
    edits = {q: d for q, d in question_decisions.items() if d["action"] == "edit_answer"}
    if not edits or "choices" not in questions.column_names:
        return questions, []
    set_aside = [{"question_id": q, "reason": "answer edited outside the choices", "decision_id": edits[q]["decision_id"],
                  "answer": edits[q]["answer"], "evidence_regions": None}
                 for q, choices in zip(questions["question_id"].to_pylist(), questions["choices"].to_pylist())
                 if q in edits and choices and edits[q]["answer"] not in choices]
    if set_aside:
        aside = pa.array(sorted(a["question_id"] for a in set_aside))
        questions = questions.filter(pc.invert(pc.is_in(questions["question_id"], aside)))
    return questions, set_aside


def _apply_to_questions(questions: pa.Table, decisions: dict[str, dict]) -> pa.Table:
    if not decisions:
        return questions
    ids = questions["question_id"].to_pylist()
    wrong = {q for q, d in decisions.items() if d["action"] == "wrong"}
    edits = {q: d["answer"] for q, d in decisions.items() if d["action"] == "edit_answer"}
    if edits:
        rows = [i for i, q in enumerate(ids) if q in edits]
        answers = questions["answer"].to_pylist()
        for i in rows:
            answers[i] = edits[ids[i]]
        questions = questions.set_column(questions.column_names.index("answer"), "answer",
                                         pa.array(answers, questions.schema.field("answer").type))
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


def write_decisions_file(applied: Applied, stats_dir: Path) -> Path:
    """The used decisions in full (sorted, canonical JSON) as ``stats/annotation_decisions.json``."""
    stats_dir.mkdir(parents=True, exist_ok=True)
    path = stats_dir / DECISIONS_FILE
    listed = {"used": applied.used, "unmatched": applied.unmatched}
    if applied.set_aside:
        listed["set_aside"] = applied.set_aside
    path.write_text(json.dumps(listed, sort_keys=True, indent=1) + "\n", encoding="utf-8")
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
