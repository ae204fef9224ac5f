"""Reading a predictions file: one JSON object per line, each checked; every line that is not scored is named.

A line is ``{"question_id": str, "answer": str, "choice": int | str (optional), "masks": [...] (optional)}``;
a mask is a COCO RLE (``{"size": [H, W], "counts": str}`` compressed, or ``counts`` a list of run lengths)
or a box ``[x, y, w, h]`` in pixels. The first valid line of a question is scored; what is not scored is a
``Problem`` (kind, ``file:line``, question id, detail): ``bad_json``, ``not_an_object``, ``no_question_id``,
``bad_answer``, ``bad_choice``, ``malformed_mask``, ``unknown_id`` (not in the split), ``duplicate_id``
(a later line of a question already predicted) and, after the file, ``missing_id`` (a question of the split
no line predicts).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reasonvqa import masks
from reasonvqa.errors import UsageError

PROBLEM_KINDS = ("bad_json", "not_an_object", "no_question_id", "bad_answer", "bad_choice", "malformed_mask",
                 "unknown_id", "duplicate_id", "missing_id")


@dataclass(frozen=True)
class Problem:
    """One prediction line (or split question) that is not scored, and why."""

    kind: str
    where: str  # file:line, or the file for a missing id
    question_id: str | None
    detail: str


@dataclass
class Prediction:
    """A valid prediction: the answer, the choice (index or text) and the masks as compressed COCO RLEs."""

    answer: str
    choice: int | str | None = None
    masks: list[dict] = field(default_factory=list)


@dataclass
class Predictions:
    """The scored predictions by question id, and every problem of the file."""

    path: Path
    lines: int
    by_id: dict[str, Prediction]
    problems: list[Problem]

    def counts(self) -> dict[str, int]:
        """Problems per kind (every kind, zeros included)."""
        return {kind: sum(p.kind == kind for p in self.problems) for kind in PROBLEM_KINDS}

    def problem_rows(self) -> list[dict]:
        return [asdict(p) for p in self.problems]


def read_predictions(path: Path, image_sizes: dict[str, tuple[int, int] | None]) -> Predictions:
    """Read and check ``path`` against a split: ``image_sizes`` maps each question id of the split to its image's
    (height, width), or None where unknown (a box then cannot be rasterized: malformed_mask; an RLE's size is
    then not checked). UsageError naming the file when it cannot be read at all. The RLEs of the whole file
    are checked in one vectorized pass (``masks.coco_problems``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: unreadable predictions file ({type(exc).__name__}: {exc})") from None
    lines = text.splitlines()
    parsed: list[tuple[int, str, Prediction, list]] = []  # (line, question id, prediction, its masks as given)
    problems: list[Problem] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            problems.append(Problem("bad_json", f"{path}:{number}", None, str(exc)))
            continue
        outcome = _prediction(record, image_sizes)
        if isinstance(outcome, Problem):
            problems.append(Problem(outcome.kind, f"{path}:{number}", outcome.question_id, outcome.detail))
        else:
            parsed.append((number, *outcome))
    rles = [mask for _, _, _, given in parsed for mask in given if not isinstance(mask, list)]
    rle_problems = iter(masks.coco_problems(rles))
    by_id: dict[str, Prediction] = {}
    first_line: dict[str, int] = {}
    for number, question_id, prediction, given in parsed:
        where = f"{path}:{number}"
        checked = [(mask, None if isinstance(mask, list) else next(rle_problems)) for mask in given]
        try:
            prediction.masks = [_mask(mask, problem, image_sizes[question_id]) for mask, problem in checked]
        except masks.MaskError as exc:
            problems.append(Problem("malformed_mask", where, question_id, str(exc)))
            continue
        if question_id in first_line:
            problems.append(Problem("duplicate_id", where, question_id, f"first predicted at line {first_line[question_id]}"))
            continue
        first_line[question_id] = number
        by_id[question_id] = prediction
    problems.sort(key=lambda p: int(p.where.rsplit(":", 1)[1]))
    for question_id in sorted(set(image_sizes) - set(by_id)):
        problems.append(Problem("missing_id", str(path), question_id, "no valid line predicts it"))
    return Predictions(path, len(lines), by_id, problems)


def _prediction(record: object, image_sizes: dict[str, tuple[int, int] | None]) -> tuple[str, Prediction, list] | Problem:
    """(question id, prediction without masks, its masks as given) of one parsed line, or the Problem (its
    ``where`` filled in by the caller)."""
    if not isinstance(record, dict):
        return Problem("not_an_object", "", None, f"a line is a JSON object, not {type(record).__name__}")
    question_id = record.get("question_id")
    if not isinstance(question_id, str) or not question_id:
        return Problem("no_question_id", "", None, "question_id is missing or not a string")
    if question_id not in image_sizes:
        return Problem("unknown_id", "", question_id, "not a question of this split")
    answer = record.get("answer", "")
    if not isinstance(answer, str):
        return Problem("bad_answer", "", question_id, f"answer is a string, not {type(answer).__name__}")
    choice = record.get("choice")
    if choice is not None and (isinstance(choice, bool) or not isinstance(choice, (int, str))):
        return Problem("bad_choice", "", question_id, "choice is an index or the choice's text")
    given = record.get("masks") or []
    if not isinstance(given, list):
        return Problem("malformed_mask", "", question_id, "masks is a list")
    return question_id, Prediction(answer, choice), given


def _mask(mask: object, problem: str | None, size: tuple[int, int] | None) -> dict:
    """One predicted mask (``problem``: what ``coco_problems`` found in an RLE) as a compressed COCO RLE of the
    image's size; MaskError when it is not one."""
    if isinstance(mask, list):
        if len(mask) != 4 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                     for v in mask) or mask[2] < 0 or mask[3] < 0:
            raise masks.MaskError(f"a box is [x, y, w, h] with w, h >= 0: {str(mask)[:60]}")
        if size is None:
            raise masks.MaskError("the image's size is unknown: give the mask as a COCO RLE")
        return masks.box_rles([mask], *size)[0]
    if problem is not None:
        raise masks.MaskError(problem)
    assert isinstance(mask, dict)  # coco_problems refuses anything else
    rle = masks.coco_compressed(mask)
    if size is not None and tuple(int(v) for v in rle["size"]) != tuple(size):
        raise masks.MaskError(f"mask size {list(rle['size'])} is not the image's {list(size)}")
    return rle
