"""Hallucination-aware questions (VistaQA 3.1-3.2, GroundingME 3.2 rejection samples).

A question about an object that co-occurs with this scene elsewhere in the corpus but is absent
here; its answer states the absence, its evidence is empty and ``is_hallucination`` is true.

1. Corpus co-occurrence: for every image, the labels of the other images that share a label with
   it, scored by how many such images hold the label (``cooccurrence_candidates``, vectorized).
2. Absence check per candidate against every label and object name of the image, whole-word in
   both directions ("car" is not absent from an image with a "car door"; ``not_absent``), and the
   image must have no region without a label (SA-1B masks may show anything; no candidate is made).
3. The question takes one of the task-type forms (counting, attribute, spatial, comparison,
   identification) chosen by a stable hash; forms that need a named present object use one.
4. Share: every valid candidate (at most ``hallucination_candidates_per_image``) goes to the pool;
   after answer balancing, tasks/balance/hallucination_share.py keeps ``balance.hallucination_share``
   (default 27%) of the kept grounded questions.
"""

from __future__ import annotations

import re

import polars as pl
import pyarrow as pa

from reasonvqa.tasks.questions.grounded import Candidate, be, plural, references, singular, stable_order
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.regions import Region

TEMPLATE_ID = "hallucination:absent_object"


def cooccurrence_candidates(corpus: pa.Table, images: list[str], per_image: int) -> dict[str, list[str]]:
    """image -> labels absent from it, most co-occurring first (ties by label), at most ``3 * per_image``.

    ``corpus`` holds (image_id, label) of every image of the build (regions.image_labels).
    """
    if corpus.num_rows == 0 or not images or per_image == 0:
        return {}
    pairs = pl.from_arrow(corpus).unique()
    mine = pairs.filter(pl.col("image_id").is_in(images))
    # images of the corpus that share a label with each of ours
    neighbours = (mine.join(pairs, on="label").filter(pl.col("image_id") != pl.col("image_id_right"))
                  .select("image_id", neighbour="image_id_right").unique())
    scores = (neighbours.join(pairs, left_on="neighbour", right_on="image_id").group_by("image_id", "label")
              .agg(score=pl.len()).join(mine, on=["image_id", "label"], how="anti")
              .sort(["image_id", "score", "label"], descending=[False, True, False]))
    top = scores.group_by("image_id", maintain_order=True).head(3 * per_image)
    out: dict[str, list[str]] = {}
    for image_id, label in top.select("image_id", "label").iter_rows():
        out.setdefault(image_id, []).append(label)
    return out


def words(text: str) -> str:
    """`` a b `` : the lower-case words of ``text`` between single spaces (for whole-word containment)."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def is_absent(label: str, present: set[str]) -> bool:
    """True when no present label contains ``label`` (or its plural) as whole words, or is contained in it."""
    forms = {words(label), words(plural(label)), words(singular(label))}
    for p in present:
        wp = words(p)
        if any(f in wp or wp in f for f in forms):
            return False
    return True


def forms(absent: str, named: list[str], attribute: str = "color") -> list[tuple[str, str]]:
    """(task type, question) forms of a hallucination question about ``absent``; ``named`` are
    phrases of present, uniquely named objects; ``attribute`` (color or material) is what the
    attribute form asks."""
    asked = (f"What color {be(absent)} the {absent}?" if attribute == "color"
             else f"What {be(absent)} the {absent} made of?")
    out = [("counting", f"How many {plural(absent)} are there in the image?"),
           ("attribute", asked),
           ("identification", f"What is the object next to the {absent}?")]
    if named:
        out += [("spatial", f"Is the {absent} to the left or to the right of {named[0]}?"),
                ("comparison", f"Which appears larger in the image, the {absent} or {named[0]}?")]
    return out


def hallucination_candidates(image_id: str, regions: list[Region], labels: set[str], absent: list[str],
                             config: GroundedConfig) -> list[Candidate]:
    """Up to ``hallucination_candidates_per_image`` questions about absent objects of one image."""
    refs = references(regions)
    named = sorted(ref for r in regions if (ref := refs.get(r.region_id)) and r.label and ref == f"the {r.label}")
    out: list[Candidate] = []
    kept = 0
    for label in absent:
        if kept >= config.hallucination_candidates_per_image:
            break
        options = [f for f in forms(label, named) if f[0] in config.task_types]
        if not options:
            continue
        task, question = options[int(stable_order(image_id, label, "form"), 16) % len(options)]
        answer = f"There are no {plural(label)} in the image." if task == "counting" else f"There {be(label)} no {label} in the image."
        c = Candidate(image_id, task, question, answer, [], is_hallucination=True, template_id=TEMPLATE_ID,
                      detail={"absent": label})
        if not is_absent(label, labels):
            c.reason = "not_absent"
        else:
            kept += 1
        out.append(c)
    return out

