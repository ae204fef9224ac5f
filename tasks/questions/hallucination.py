"""Hallucination-aware questions (VistaQA 3.1-3.2, GroundingME 3.2 rejection samples).

A question about an object that co-occurs with this scene elsewhere in the corpus but is absent
here; its answer states the absence, its evidence is empty and ``is_hallucination`` is true.

1. Absent labels and their basis (absence.py ``absent_labels``): classes of an exhaustive taxonomy
   (nuScenes), labels improbable for the scene by corpus co-occurrence, and the most co-occurring
   labels (unbased: likely present but unannotated; set aside until a review confirms them).
2. Absence check per candidate against every label and object name of the image, whole-word in
   both directions ("car" is not absent from an image with a "car door"; ``not_absent``), and the
   image must have no region without a label (SA-1B masks may show anything; no candidate is made).
3. The question takes one of the forms real questions take (counting, attribute, identification by
   position "What is the object above the <absent>?", spatial, comparison; ``forms``) chosen by a stable
   hash in proportion to the image's real questions per form; forms that need a named present object use one. The absent
   label must be an object class (object_classes.py) and is named by its synset's lemma. The identification
   form takes one based absent object per real position question, drawn over the shard (position_draw.py).
4. Share: every valid candidate (at most ``hallucination_candidates_per_image`` per basis) goes to the pool;
   after answer balancing, tasks/balance/hallucination_share.py keeps ``balance.hallucination_share``
   (default 27%) of the kept grounded questions.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from reasonvqa.tasks.questions.absence import AbsentLabel
from reasonvqa.tasks.questions.grounded import (Candidate, attribute_question, be, count_question, countable, flip,
                                                larger_question, pick, pick_form, plural, references, singular,
                                                spatial_question)
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.object_classes import OBJECT_LEXNAMES, synset_lemma, word_class
from reasonvqa.tasks.questions.position_draw import draw_positions
from reasonvqa.tasks.questions.position_identification import SIDES, form_of, identify_question
from reasonvqa.tasks.questions.regions import Region

TEMPLATE_ID = "hallucination:absent_object"


_WORD = re.compile(r"[a-z0-9]+")


@functools.lru_cache(maxsize=1 << 16)  # called for every present label of every image, per absent candidate
def words(text: str) -> str:
    """`` a b `` : the lower-case words of ``text`` between single spaces (for whole-word containment)."""
    return " " + " ".join(_WORD.findall(text.lower())) + " "


def is_absent(label: str, present: set[str]) -> bool:
    """True when no present label contains ``label`` (or its plural) as whole words, or is contained in it."""
    return PresentWords(present).absent(label)


@functools.lru_cache(maxsize=1 << 16)
def _substrings(text: str) -> frozenset[str]:
    """Every non-empty substring of ``text`` (a label's words: short)."""
    return frozenset(text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1))


class PresentWords:
    """The present labels of one image, as ``words``, for many ``absent`` tests: "a present label contains f" is one
    substring search in their join (no ``words`` text holds the separator) and "f contains a present label" a set
    intersection with f's substrings."""

    def __init__(self, present: set[str]) -> None:
        self.words = {words(p) for p in present}
        self.joined = "\x00".join(self.words)

    def absent(self, label: str) -> bool:
        """``is_absent(label, present)``."""
        for f in {words(label), words(plural(label)), words(singular(label))}:
            if f in self.joined or not _substrings(f).isdisjoint(self.words):
                return False
        return True


def forms(absent: str, named: list[str], attribute: str = "color", key: tuple[str, ...] = (),
          counting: bool = True) -> list[tuple[str, str, str]]:
    """(task type, form, question) forms of a hallucination question about "the <absent>": exactly the forms real
    questions take (grounded.py), so the wording carries no signal. ``named`` are phrases of present, uniquely
    named objects (the other object of a spatial or size question, drawn by a stable hash of ``key``, as are the
    axis, which object is named first and which option comes first); ``attribute`` (color or material) is what
    the attribute form asks; ``counting`` False leaves out "How many <absent> are there in the image?"."""
    return [(task, form, question()) for task, form, question in lazy_forms(absent, named, attribute, key, counting)]


def lazy_forms(absent: str, named: list[str], attribute: str = "color", key: tuple[str, ...] = (),
               counting: bool = True) -> list[tuple[str, str, Callable[[], str]]]:
    """``forms`` with each question written only when called (a candidate takes one form of several)."""
    ref = f"the {absent}"
    out: list[tuple[str, str, Callable[[], str]]] = []
    if counting and countable(absent):
        out.append(("counting", "count", lambda: count_question(plural(absent))))
    out.append(("attribute", attribute, lambda: attribute_question(ref, attribute)))
    if named:
        def spatial() -> str:
            other = pick(named, *key, "other")
            a, b = (other, ref) if flip(*key, "spatial first") else (ref, other)
            axis = pick(["horizontal", "vertical"], *key, "axis")
            return spatial_question(a, b, axis, flip(*key, "options"))

        def larger() -> str:
            other = pick(named, *key, "other")
            a, b = (other, ref) if flip(*key, "larger first") else (ref, other)
            return larger_question(a, b)

        out += [("spatial", "spatial", spatial), ("comparison", "larger", larger)]
    return out


def identification_slots(weights: dict[str, int] | None) -> list[tuple[str, str, str]]:
    """(task type, form, predicate) per real identification-by-position question of the image, in a fixed order:
    each is the form of one identification hallucination question, so the image has no more of them per side
    than real ones (the wording carries no signal; "What is the red object?" has no counterpart with a basis)."""
    weights = weights or {}
    return [("identification", form_of(p), p) for p in SIDES for _ in range(weights.get(form_of(p), 0))]


@functools.lru_cache(maxsize=1 << 16)
def _absent_class(label: str) -> tuple[str | None, str | None, str]:
    """(synset, lexname, name) of an absent label: its most frequent noun sense and the name questions use."""
    synset, lex = word_class(label)
    return synset, lex, synset_lemma(synset) or label


@dataclass(frozen=True)
class AbsentCheck:
    """One absent label of an image: its class, the name questions use, and why it is refused (None: valid)."""

    choice: AbsentLabel
    synset: str | None
    lexname: str | None
    name: str
    reason: str | None


def check_absent(regions: list[Region], labels: set[str], absent: list[AbsentLabel]) -> list[AbsentCheck]:
    """Each of an image's absent labels checked: a label whose sense is no object class (``non_object_class``) or
    that WordNet does not know (``unknown_class``) is refused, and one whose class a region of the image has, or
    that a present label or name contains as whole words or contains (``is_absent``), is ``not_absent``."""
    present = {r.synset for r in regions if r.synset}
    # the region labels too: a region may be named by its synset's lemma ("cartridge holder" for the object "clip"),
    # and "no holder" would be false of it
    present_words = PresentWords(labels | {r.label for r in regions if r.label})
    out = []
    for choice in absent:
        synset, lex, name = _absent_class(choice.label)
        reason = ("unknown_class" if synset is None else "non_object_class" if lex not in OBJECT_LEXNAMES else
                  "not_absent" if synset in present or not present_words.absent(choice.label)
                  or not present_words.absent(name) else None)
        out.append(AbsentCheck(choice, synset, lex, name, reason))
    return out


def position_options(checks: list[AbsentCheck]) -> list[tuple[AbsentLabel, str]]:
    """(absent label, name) of the valid absent objects with a basis: those the identification form may take."""
    return [(c.choice, c.name) for c in checks if c.reason is None and c.choice.basis is not None]


def position_slots(weights: dict[str, int] | None, config: GroundedConfig) -> list[tuple[str, str, str]]:
    """``identification_slots`` where the config asks identification questions (else none)."""
    return identification_slots(weights) if "identification" in config.task_types else []


def hallucination_candidates(image_id: str, regions: list[Region], labels: set[str], absent: list[AbsentLabel],
                             config: GroundedConfig, weights: dict[str, int] | None = None,
                             checks: list[AbsentCheck] | None = None,
                             drawn: list[AbsentLabel] | None = None) -> list[Candidate]:
    """Up to ``hallucination_candidates_per_image`` questions per basis about absent objects of one image, and
    identification questions by position about based absent objects, one per real one (``identification_slots``).

    An absent label is named by the lemma of its most frequent noun sense (object_classes.word_class:
    "trees" -> "tree") and checked (``check_absent``; ``checks``: already done). The form is drawn in proportion
    to ``weights`` (the image's real questions per form, grounded.pick_form). ``drawn``: the absent objects that
    take the identification form, drawn over the shard (position_draw.draw_positions; None: over this image alone).
    """
    refs = references(regions)
    named = sorted(ref for r in regions if (ref := refs.get(r.region_id)) and r.label and ref == f"the {r.label}")
    checks = check_absent(regions, labels, absent) if checks is None else checks
    slots = position_slots(weights, config)
    if drawn is None:
        drawn = draw_positions({image_id: position_options(checks)}, {image_id: len(slots)})[image_id]
    out: list[Candidate] = []
    kept: Counter = Counter()
    for check in checks:
        choice, name, label = check.choice, check.name, check.choice.label
        picked = []
        if kept[choice.basis] < config.hallucination_candidates_per_image:
            options = [f for f in lazy_forms(name, named, key=(image_id, label)) if f[0] in config.task_types]
            if options:
                task, form, question = pick_form(options, weights, image_id, label, "form")
                picked.append((task, form, question()))
        if slots and any(choice is d for d in drawn):
            task, form, predicate = slots.pop(0)
            picked.append((task, form, identify_question(predicate, f"the {name}")))
        for task, form, question in picked:
            answer = f"There are no {plural(name)} in the image." if task == "counting" else f"There {be(name)} no {name} in the image."
            c = Candidate(image_id, task, question, answer, [], is_hallucination=True, template_id=TEMPLATE_ID,
                          detail={"absent": label, "synset": check.synset, "lexname": check.lexname,
                                  "absence_basis": choice.basis, "absence_evidence": choice.evidence}, form=form)
            c.reason = check.reason
            if check.reason is None and task != "identification":
                kept[choice.basis] += 1
            out.append(c)
    return out
