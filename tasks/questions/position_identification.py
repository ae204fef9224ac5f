"""Identification by position: "What is the object to the left of the bus?" -> "tree" (issue 30).

The identification form that a hallucination question can share: it names a class ("the bus"), so an
absent class with a basis fills the same words ("What is the object to the left of the giraffe?" ->
"There is no giraffe in the image.", hallucination.py), while "What is the red object in the image?"
names no class and has no hallucination counterpart with a basis (Visual Genome's attributes are not
exhaustive, so no colour can be claimed absent from every region).

A real question needs, for an anchor region named unambiguously (grounded.references) and a side
(left/right by the image width, above/below by its height):

- at least one labeled region clearly on that side (grounded.spatial_answer: past the anchor's edge by
  ``spatial_margin``), all of one class, and several of them only when they duplicate one box
  (IoU >= ``duplicate_iou``); that class must be an object class (a subject region);
- no other labeled region whose centre is on that side of the anchor's edge without being clearly
  past it (``ambiguous_spatial``), except regions whose box meets the anchor's (the wall behind a
  picture, the table under a cup are at the anchor, not beside it): the answer is then the only
  annotated object there.

Images with an unlabeled region (SA-1B masks) get none: an unlabeled region could be anything.
Visual Genome does not annotate every object, so the answer is "the only annotated object there", the
limit counting questions share. Anchors in a stable hash order, sides in a fixed order, at most
``max_pairs_per_image`` kept per image. The form is ``identify <predicate>`` (one per side), so the
hallucination questions take each side as often as the image's real ones (hallucination.identification_slots).
A real row names its form in ``template_ids`` (``TEMPLATE_ID``): the form hallucination questions share, so
balancing, when it must thin an identification cell's real questions to reach the hallucination share, thins
the forms without a hallucination counterpart first (tasks/balance/hallucination_share.py).
"""

from __future__ import annotations

import itertools

import numpy as np

from reasonvqa.tasks.questions.grounded import Candidate, stable_order
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.regions import Region, box_iou, side_masks

TEMPLATE_ID = "grounded:identify_position"
# predicate -> (axis, side as spatial_answer names it)
SIDES = {"to the left of": ("horizontal", "left"), "to the right of": ("horizontal", "right"),
         "above": ("vertical", "above"), "below": ("vertical", "below")}


def form_of(predicate: str) -> str:
    """The form name of one side ("identify above"): real and hallucination questions share it."""
    return f"identify {predicate}"


def identify_question(predicate: str, ref: str) -> str:
    """"What is the object to the left of the bus?"."""
    return f"What is the object {predicate} {ref}?"


def _centre_past(regions: list[Region]) -> dict[str, np.ndarray]:
    """side -> [i, j] True where the centre of ``regions[i]`` lies beyond the edge of ``regions[j]`` on that side
    (clearly there or not)."""
    x, y, w, h = np.array([(r.x, r.y, r.w, r.h) for r in regions], dtype=np.float64).reshape(-1, 4).T
    cx, cy = x + w / 2, y + h / 2
    return {"left": cx[:, None] < x[None, :], "right": cx[:, None] > (x + w)[None, :],
            "above": cy[:, None] < y[None, :], "below": cy[:, None] > (y + h)[None, :]}


def _meets(regions: list[Region]) -> np.ndarray:
    """[i, j] True where the boxes of ``regions[i]`` and ``regions[j]`` overlap or touch."""
    x, y, w, h = np.array([(r.x, r.y, r.w, r.h) for r in regions], dtype=np.float64).reshape(-1, 4).T
    right, bottom = x + w, y + h
    return ((x[:, None] <= right[None, :]) & (x[None, :] <= right[:, None]) & (y[:, None] <= bottom[None, :])
            & (y[None, :] <= bottom[:, None]))


def position_identifications(regions: list[Region], refs: dict[str, str], image: dict,
                             config: GroundedConfig) -> list[Candidate]:
    """The position identification candidates of one image (kept ones and ``ambiguous_spatial`` /
    ``several_objects`` rejects); none where a region has no label. The geometry of every (region, anchor)
    pair is computed at once (numpy), the same comparisons as ``grounded.spatial_answer``."""
    if "identification" not in config.task_types or any(not r.label for r in regions):
        return []
    width, height = image.get("width") or 0, image.get("height") or 0
    anchors = sorted((r for r in regions if r.region_id in refs), key=lambda r: stable_order(r.region_id, "position"))
    if not anchors:
        return []
    column = {r.region_id: j for j, r in enumerate(regions)}
    clear = side_masks(regions, config.spatial_margin * width, config.spatial_margin * height)
    past, meets = _centre_past(regions), _meets(regions)
    out: list[Candidate] = []
    kept = 0
    for anchor, predicate in itertools.product(anchors, SIDES):
        if kept >= config.max_pairs_per_image:
            break
        _, side = SIDES[predicate]
        j = column[anchor.region_id]
        here = clear[side][:, j].copy()
        here[j] = False  # the anchor itself is not among the others
        there = [regions[i] for i in np.flatnonzero(here)]
        if not there or len({r.label for r in there}) > 1 or not there[0].subject:
            continue  # nothing there, or objects of several classes: no single answer to examine
        label = there[0].label
        assert label is not None  # ``there`` holds labeled regions only (no region is unlabeled here)
        c = Candidate(anchor.image_id, "identification", identify_question(predicate, refs[anchor.region_id]), label,
                      [r.region_id for r in there] + [anchor.region_id], detail={"predicate": predicate},
                      template_id=TEMPLATE_ID, form=form_of(predicate))
        beside = past[side][:, j] & ~meets[:, j] & ~here
        beside[j] = False
        if beside.any():
            c.reason = "ambiguous_spatial"
        elif any(box_iou(a, b) < config.duplicate_iou for a, b in itertools.combinations(there, 2)):
            c.reason = "several_objects"
        else:
            kept += 1
        out.append(c)
    return out
