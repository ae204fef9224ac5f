"""The dataset card's breakdown (VistaQA figure 2) and its example pictures with masks drawn.

``write_breakdown`` writes ``breakdown.json`` and ``examples/*.png`` into a release's stats folder;
``breakdown_section`` renders them as the card's "Question breakdown" section. Counts are over the
released questions (train + test): per task type, per visual domain (hallucination or not), per
kind, per evidence multiplicity (number of evidence regions; 0 = hallucination), per
hallucination form (the ``hallucination:<form>`` entry of a hallucination row's ``template_ids``) and per
absence basis (``absence_basis``; "none" for a row without one).
``released_questions`` reads the splits' few breakdown columns ``SLICE_ROWS`` rows at a time, and
the counts and the examples' candidates are added up slice by slice, so memory does not grow with
the release (the same ``breakdown.json`` and pictures as from one table: tested).

Pictures are drawn on the photo when its bytes can be had and its source's license allows
redistribution (a picture on a photo is a derivative of it; a ``pixels`` lookup: read through the
source, ``tasks/release/pixels.py``, or embedded in a release), else on a blank grey canvas of the
image's true size; ``breakdown.json`` and the card say which for each picture, and why. How a picture is
drawn (true size, masks filled and labelled, question and answer as caption): ``tasks/release/pictures.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa.absence_bases import EXEMPT_RULE
from reasonvqa.codes import dense_codes, filled
from reasonvqa.tasks.release.pictures import draw_example
from reasonvqa.tasks.release.pixels import Pixels

MULTIPLICITY_BINS = ("0", "1", "2", "3", "4", "5-9", "10+")
EXAMPLES_PER_TASK = 2


def visual_domains() -> dict[str, str]:
    """source kind -> the visual domain its class declares (reasonvqa.sources registry)."""
    from reasonvqa import sources

    return {kind: sources.source_class(kind).visual_domain or "unknown" for kind in sources.kinds()}


def _bin(n: int) -> str:
    return str(n) if n < 5 else "5-9" if n < 10 else "10+"


def breakdown(questions: "pa.Table | ReleasedQuestions", domains: dict[str, str]) -> dict:
    """Counts per task type, visual domain (by hallucination flag), kind and evidence multiplicity."""
    counts = _Counts(domains)
    for part in _slices(questions):
        counts.add(part)
    return counts.report()


class _Counts:
    """``breakdown``'s counters, added up one slice of questions at a time."""

    def __init__(self, domains: dict[str, str]) -> None:
        self.domains = domains
        self.questions = 0
        self.tasks: Counter = Counter()
        self.kinds: Counter = Counter()
        self.by_domain: dict[str, Counter] = {}
        self.multiplicity: Counter = Counter()
        self.hallucination = 0
        self.forms: Counter = Counter()
        self.bases: Counter = Counter()

    def add(self, questions: pa.Table) -> None:
        """Count one slice in Arrow (a Python value per distinct value, not per row)."""
        halluc = filled(questions, "is_hallucination", False).to_numpy(zero_copy_only=False).astype(bool)
        self.questions += questions.num_rows
        self.kinds.update(_value_counts(filled(questions, "kind", "template")))
        self.tasks.update(_value_counts(filled(questions, "task_type", "none")))
        source_codes, sources = dense_codes(filled(questions, "image_source", "unknown"))
        sources = sources.to_pylist()
        for (code, h), count in zip(*_pair_counts(source_codes, halluc)):
            domain = self.by_domain.setdefault(self.domains.get(sources[code], "unknown"), Counter())
            domain["hallucination" if h else "other"] += count
        if "evidence_region_ids" in questions.column_names:  # questions without evidence ids: not counted
            lengths = pc.drop_null(pc.list_value_length(questions["evidence_region_ids"])).to_numpy()
            for regions, count in enumerate(np.bincount(np.minimum(lengths, 10), minlength=11).tolist()):
                if count:  # 10 stands for 10 or more: one bin
                    self.multiplicity[_bin(regions)] += count
        self.hallucination += int(np.count_nonzero(halluc))
        if halluc.any():  # hallucination rows only: few, their template ids read as Python values
            rows = pa.array(np.flatnonzero(halluc))
            templates = (questions["template_ids"].take(rows).to_pylist() if "template_ids" in questions.column_names
                         else [None] * len(rows))
            self.forms.update(hallucination_form(t) for t in templates)
            bases = (questions["absence_basis"].take(rows).to_pylist() if "absence_basis" in questions.column_names
                     else [None] * len(rows))
            self.bases.update(b or "none" for b in bases)

    def report(self) -> dict:
        return {
            "questions": self.questions,
            "task_type": dict(sorted(self.tasks.items())),
            "kind": dict(sorted(self.kinds.items())),
            "domain": {d: dict(sorted(c.items())) for d, c in sorted(self.by_domain.items())},
            "evidence_multiplicity": {b: self.multiplicity.get(b, 0) for b in MULTIPLICITY_BINS},
            "hallucination": self.hallucination,
            "hallucination_form": dict(sorted(self.forms.items())),
            "absence_basis": {b: self.bases[b] for b in _basis_order(self.bases)},
        }


def _basis_order(bases: Counter) -> list[str]:
    """The counted bases strongest first (absence_bases.BASES), then any other, then "none"."""
    from reasonvqa.absence_bases import BASES

    return [b for b in BASES if b in bases] + sorted(set(bases) - set(BASES) - {"none"}) + (["none"] if "none" in bases else [])


def _value_counts(column: pa.ChunkedArray | pa.Array) -> dict:
    """{value: rows} of a column without nulls."""
    counts = pc.value_counts(column)
    return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))


def _pair_counts(codes: np.ndarray, flags: np.ndarray) -> tuple[list[tuple[int, bool]], list[int]]:
    """The distinct (code, flag) pairs of the rows and how many rows hold each."""
    pairs, counts = np.unique(codes * 2 + flags.astype(np.int64), return_counts=True)
    return [(int(p) // 2, bool(p % 2)) for p in pairs], counts.tolist()


def hallucination_form(template_ids: list[str] | None) -> str:
    """"absent_object", "wrong_attribute", "impossible_relation", "vlm_negative" from a hallucination row's
    ``template_ids`` (``hallucination:<form>``); "unspecified" for rows without one (releases before the forms)."""
    for t in template_ids or []:
        if t.startswith("hallucination:"):
            return t.removeprefix("hallucination:")
    return "unspecified"


def pick_examples(questions: "pa.Table | ReleasedQuestions", per_task: int = EXAMPLES_PER_TASK) -> list[dict]:
    """The first ``per_task`` questions (by question_id) of each task type that have evidence regions."""
    return _first_per_task([row for part in _slices(questions) for row in _examples_of_slice(part, per_task)], per_task)


def _examples_of_slice(questions: pa.Table, per_task: int) -> list[dict]:
    """``pick_examples`` of one slice: among them are the whole's picks that lie in this slice."""
    if "evidence_region_ids" not in questions.column_names or questions.num_rows == 0:
        return []
    has = pc.fill_null(pc.greater(pc.list_value_length(questions["evidence_region_ids"]), 0), False)
    rows = questions.filter(has).select(["question_id", "image_id", "task_type", "question", "answer",
                                         "evidence_region_ids"]).sort_by("question_id")
    taken: Counter = Counter()
    picked = []
    for n, task in enumerate(rows["task_type"].to_pylist()):
        if taken[task] < per_task:
            taken[task] += 1
            picked.append(n)
    return rows.take(pa.array(picked, pa.int64())).to_pylist()


def _first_per_task(rows: list[dict], per_task: int) -> list[dict]:
    """The ``per_task`` rows of smallest question_id per task type, by (task type, question_id)."""
    out: list[dict] = []
    taken: Counter[str] = Counter()
    for row in sorted(rows, key=lambda r: (r["question_id"] is None, r["question_id"] or "")):  # Arrow's order
        if taken[row["task_type"]] < per_task:
            taken[row["task_type"]] += 1
            out.append(row)
    return sorted(out, key=lambda r: (r["task_type"], r["question_id"]))


BREAKDOWN_COLUMNS = ["question_id", "image_id", "image_source", "question", "answer", "kind", "task_type",
                     "is_hallucination", "evidence_region_ids", "template_ids", "absence_basis"]  # what the breakdown and the examples read
COUNTED_COLUMNS = ["image_source", "kind", "task_type", "is_hallucination", "evidence_region_ids",
                   "template_ids", "absence_basis"]  # what the counts alone read (a release without regions has no examples)


SLICE_ROWS = 262_144  # released questions counted (and gathered) at a time


class ReleasedQuestions:
    """The BREAKDOWN_COLUMNS of the released splits (tables, the writer's ``TableRows`` or the
    partitioned path's ``SpilledRows``), read ``rows`` at a time: never all of them at once."""

    def __init__(self, splits: tuple, rows: int = SLICE_ROWS) -> None:
        self.splits, self.rows = splits, rows
        self.num_rows = sum(split.num_rows for split in splits)

    def slices(self, columns: list[str] = BREAKDOWN_COLUMNS) -> Iterator[pa.Table]:
        """``columns`` of the released rows, ``rows`` at a time, split after split."""
        for split in self.splits:
            if isinstance(split, pa.Table):  # a table made without the newer columns is counted without them
                table = split.select([c for c in columns if c in split.column_names])
                yield from (table.slice(start, self.rows) for start in range(0, table.num_rows, self.rows))
            else:
                yield from split.slices(columns, self.rows)


def released_questions(*splits) -> ReleasedQuestions:
    """The BREAKDOWN_COLUMNS of the released splits, in order, for ``write_breakdown`` (streamed)."""
    return ReleasedQuestions(splits)


def _slices(questions: "pa.Table | ReleasedQuestions", columns: list[str] = BREAKDOWN_COLUMNS) -> Iterator[pa.Table]:
    return questions.slices(columns) if isinstance(questions, ReleasedQuestions) else iter([questions])


def write_breakdown(questions: "pa.Table | ReleasedQuestions", regions: pa.Table | None, stats_dir: Path,
                    pixels: Callable[[str], Pixels] | None = None) -> dict[str, Path]:
    """Write ``breakdown.json`` and the example pictures under ``stats_dir``; return {name: path}.

    ``pixels`` (image id -> Pixels) gives the photos the pictures are drawn on; without it, or for an
    image it has no bytes of, a picture is drawn on a blank canvas (``background`` says why)."""
    stats_dir = Path(stats_dir)
    with_examples = regions is not None and regions.num_rows > 0
    counts, found = _Counts(visual_domains()), []
    # one pass over the released questions, a slice at a time (the examples' text columns only when drawn)
    for part in _slices(questions, BREAKDOWN_COLUMNS if with_examples else COUNTED_COLUMNS):
        counts.add(part)
        if with_examples:
            found += _examples_of_slice(part, EXAMPLES_PER_TASK)
    report = counts.report()
    examples = []
    if with_examples:
        assert regions is not None  # with_examples: regions has rows
        wanted = _first_per_task(found, EXAMPLES_PER_TASK)
        ids = sorted({rid for q in wanted for rid in q["evidence_region_ids"]})
        found = {r["region_id"]: r for r in regions.filter(pc.is_in(regions["region_id"], pa.array(ids, pa.string())))
                 .select(["region_id", "label", "x", "y", "w", "h", "mask"]).to_pylist()}
        for q in wanted:
            shown = [found[rid] for rid in q["evidence_region_ids"] if rid in found]
            if not shown:
                continue
            name = f"examples/{q['task_type']}-{q['question_id']}.png"
            photo = pixels(q["image_id"]) if pixels is not None else Pixels(None, "no_pixels: no pixel source given")
            why = None
            if photo.data is None:
                assert photo.reason is not None, "Pixels without bytes carry the reason"
                why = photo.reason.split(":")[0]
            drawn = draw_example(shown, stats_dir / name, photo.data, size=photo.size, why_blank=why,
                                 caption=f"Q: {q['question']}  A: {q['answer']}")
            examples.append({"file": name, "task_type": q["task_type"], "question": q["question"], "answer": q["answer"],
                             "regions": len(shown), "image_id": q["image_id"],
                             "background": "photo" if why is None else f"blank canvas ({why})", **drawn})
    report["examples"] = examples
    path = stats_dir / "breakdown.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return {"breakdown.json": path}


def breakdown_section(report: dict) -> list[str]:
    """The card's "Question breakdown" section (markdown lines) from ``breakdown.json``."""
    lines = ["## Question breakdown", "",
             f"{report['questions']} released questions, {report['hallucination']} of them hallucination questions "
             "(the asked thing is absent; empty evidence). Details in `stats/breakdown.json`.", "",
             "| task type | questions |", "| --- | ---: |"]
    lines += [f"| {k} | {v} |" for k, v in report["task_type"].items()]
    lines += ["", "| visual domain | non-hallucination | hallucination |", "| --- | ---: | ---: |"]
    lines += [f"| {d} | {c.get('other', 0)} | {c.get('hallucination', 0)} |" for d, c in report["domain"].items()]
    if report["hallucination"]:
        lines += ["", "The hallucination share is held within 10 points of its target in every task type and visual "
                  f"domain (`stats/balance_report.json`), except by a stated rule: {EXEMPT_RULE}."]
    if report.get("hallucination_form"):
        lines += ["", "| hallucination form | questions |", "| --- | ---: |"]
        lines += [f"| {k.replace('_', ' ')} | {v} |" for k, v in report["hallucination_form"].items()]
    if report.get("absence_basis"):
        total = sum(report["absence_basis"].values())
        lines += ["", "What backs each hallucination question's absence claim (`absence_basis`, strongest first; "
                  "`absence_evidence` holds the particulars; questions without a basis are set aside, not released):",
                  "", "| absence basis | questions | share |", "| --- | ---: | ---: |"]
        lines += [f"| {b} | {n} | {n / total:.1%} |" for b, n in report["absence_basis"].items()]
    lines += ["", "| kind | questions |", "| --- | ---: |"]
    lines += [f"| {k} | {v} |" for k, v in report["kind"].items()]
    lines += ["", "| evidence regions | questions |", "| --- | ---: |"]
    lines += [f"| {b} | {report['evidence_multiplicity'].get(b, 0)} |" for b in MULTIPLICITY_BINS]
    if report.get("examples"):
        lines += ["", "Examples at the image's true size (evidence masks filled, boxes outlined, each tagged with its "
                  "number and label; the question, answer and legend in the caption band under the image), drawn on "
                  "the photo where its pixels were at hand, else on a blank canvas of the image's size (the reason in "
                  "brackets):", ""]
        for e in report["examples"]:
            on = e.get("background", "blank canvas")
            size = f"{e['width']} x {e['height']}, " if "width" in e else ""
            lines += [f"- {e['task_type']}: {e['question']} -> {e['answer']} ({e['regions']} region(s); {size}on {on})",
                      f"  ![{e['task_type']}: {_alt(e['question'])} {_alt(e['answer'])}](stats/{e['file']})"]
    return lines


def _alt(text: str) -> str:
    """``text`` safe inside a markdown image's alt text (no brackets)."""
    return text.replace("[", "(").replace("]", ")")


REGION_COLUMNS = {
    "region_id": "`<image_id>/g<native id>`; questions' `evidence_region_ids` point here",
    "image_id": "the image, as in the questions",
    "label": "class name (null for SA-1B masks, which have none)",
    "x, y, w, h": "box XYWH in pixels of the original image",
    "mask": "COCO RLE `{size: [height, width], counts}` (compressed counts string; `pycocotools.mask.decode`), null for box-only regions",
    "area": "mask area in pixels (box area without a mask)",
    "score": "model or annotation confidence, null for human annotations",
    "origin": "`annotation:<source>` or the model chain that proposed it",
}


def regions_section() -> list[str]:
    """The card's description of the ``regions/`` table."""
    return ["## Regions", "", "`regions/` holds the pixel evidence of the released images (schema `reasonvqa.schemas.REGIONS`; "
            "further columns: predicted_iou, stability_score, prompt, attributes, visibility, center_3d, extra).", "",
            "| column | meaning |", "| --- | --- |", *[f"| `{c}` | {m} |" for c, m in REGION_COLUMNS.items()]]
