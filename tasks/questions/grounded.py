"""Grounded questions from regions, without an LLM (VistaQA 3.1 task types; the ``grounded`` stage).

One shard of images with its regions (source, proposals, and box-only regions of annotated
objects, see regions.py) -> questions whose ``evidence_region_ids`` prove the answer:

- counting: "How many cars are there in the image?" -> "3", evidence = every region of the class;
  skipped (``duplicate_boxes``) when two boxes of the class overlap by ``duplicate_iou`` or more
  (duplicate annotations make the count unreliable), and above ``max_count`` (``count_too_large``);
- spatial: left/right and above/below from box geometry, in front of/behind from camera-frame
  depth (nuScenes 3D boxes), and "which of the cars is nearest" among 2-3 instances of one class
  told apart by their left-to-right order; pairs closer than the margin are ``ambiguous_spatial``;
- comparison: which of two regions is larger (area ratio at least ``size_ratio``, else
  ``ambiguous_size``), which of two classes has more instances (``equal_counts`` otherwise);
- identification: "What is the red object in the image?" when one region has that attribute;
- attribute: "What color is the car?" from Visual Genome attribute words (templates/grounded/attributes.yaml).

Evidence region ids are listed in the order the question mentions the regions (subject first),
else in region id order. A region is referred to as "the <label>" when its label is unique in the image, "the <attribute>
<label>" when that pair is, and "the marked region k" when it has no label (SA-1B; k is its place in the
evidence, never its coordinates); otherwise it is not referred to. The first option of every "A or B" question
is drawn by a stable coin (``flip``). Hallucination questions are added by hallucination.py (absent objects),
hallucination_attribute.py (wrong attributes) and hallucination_relation.py (impossible relations).

Accounting (rows_in): every candidate question examined ends as one question or one reject.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from reasonvqa.yaml_files import load_yaml
from reasonvqa import absence_bases, schemas
from reasonvqa.absence_bases import evidence_text
from reasonvqa.paths import DATA_DIR, TEMPLATES_DIR
from reasonvqa.stage import Rejects
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.regions import Region, box_iou
from reasonvqa.tasks.questions.text import english

KIND = "grounded"
STAGE = "grounded"
ATTRIBUTES_FILE = TEMPLATES_DIR / "grounded" / "attributes.yaml"
UNCOUNTABLE_FILE = TEMPLATES_DIR / "grounded" / "uncountable.yaml"
_ORDINALS = {2: ("left", "right"), 3: ("leftmost", "middle", "rightmost")}


@dataclass
class Candidate:
    """One candidate question of an image; ``reason`` set when it is rejected."""

    image_id: str
    task_type: str
    question: str
    answer: str
    evidence: list[str]
    is_hallucination: bool = False
    reason: str | None = None
    detail: dict = field(default_factory=dict)
    template_id: str | None = None  # hallucination sub-type ("hallucination:absent_object") or a real form shared with
    # hallucination questions ("grounded:identify_position"): the row's template_ids
    form: str = ""  # the wording ("count", "color", "spatial", "larger", "relation_count", ...), shared by real and hallucination


@lru_cache(maxsize=1)
def attribute_words() -> dict[str, str]:
    """attribute word -> its category (color, material), from templates/grounded/attributes.yaml."""
    data = load_yaml(ATTRIBUTES_FILE.read_text(encoding="utf-8"))
    return {word: category for category, words in sorted(data.items()) for word in words}


RULE_FILES = (ATTRIBUTES_FILE, UNCOUNTABLE_FILE, TEMPLATES_DIR / "grounded" / "wrong_attributes.yaml", TEMPLATES_DIR / "grounded" / "relations.yaml",
              Path(__file__), *(Path(__file__).with_name(n) for n in ("hallucination.py", "hallucination_attribute.py",
                                                                     "hallucination_relation.py", "absence.py",
                                                                     "position_identification.py", "cooccurrence.py",
                                                                     "coco_taxonomy.py", "detector_negatives.py")),
              Path(absence_bases.__file__), DATA_DIR / "coco_categories.tsv")


@lru_cache(maxsize=1)
def uncountable() -> frozenset[str]:
    """Mass-noun class labels (templates/grounded/uncountable.yaml): never counted."""
    return frozenset(str(w).lower() for w in load_yaml(UNCOUNTABLE_FILE.read_text(encoding="utf-8"))["uncountable"])


@lru_cache(maxsize=1 << 16)
def countable(label: str) -> bool:
    """False for a mass noun ("apparel", "grass"), whose plural a counting question cannot use."""
    return label.lower() not in uncountable() and singular(label.lower()) not in uncountable()


@lru_cache(maxsize=1)
def rules_version() -> str:
    """Content hash of the rule modules and their word lists: the ``template_version`` of grounded rows."""
    digest = hashlib.sha256()
    for path in RULE_FILES:
        digest.update(path.read_bytes())
    return "grounded:" + digest.hexdigest()[:16]


@lru_cache(maxsize=8192)
def is_plural(label: str) -> bool:
    """True for a plural label ("curtains", "sneakers"); inflect reads "bus" and "tennis" as plurals of
    "bu" and "tenni", so words ending in -ss, -us, -is count as singular."""
    return bool(english().singular_noun(label)) and not label.endswith(("ss", "us", "is"))


@lru_cache(maxsize=8192)
def plural(label: str) -> str:
    """English plural of a label ("car" -> "cars", "traffic light" -> "traffic lights"); a plural label as it is."""
    return label if is_plural(label) else english().plural_noun(label) or label


@lru_cache(maxsize=8192)
def singular(label: str) -> str:
    """English singular of a label ("cars" -> "car"); the label itself when it is not a plural."""
    return english().singular_noun(label) or label


def be(label: str) -> str:
    """"are" for a plural label ("curtains"), else "is"."""
    return "are" if is_plural(label) else "is"


def json_writer(**options: Any) -> Callable[[Any], str]:
    """``json.dumps(obj, **options)``, the same text, with the C encoder made once rather than once per call."""
    encoder = json.JSONEncoder(**options)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None:
        return encoder.encode
    strings = json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring
    encode = make(None, encoder.default, strings, None, encoder.key_separator, encoder.item_separator,
                  encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)
    return lambda obj: "".join(encode(obj, 0))


_ID_JSON = json_writer(separators=(",", ":"))
_RECORD_JSON = json_writer(default=str, sort_keys=True)  # a reject's record as Rejects.add writes it


def question_id(kind: str, image_id: str, task_type: str, question: str, answer: str) -> str:
    """blake2b of kind, image, task type, question and answer, 20 hex characters."""
    text = _ID_JSON([kind, image_id, task_type, question, answer])
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def stable_order(*parts: str) -> str:
    """A sort key that is stable across runs but unrelated to the text (pair selection)."""
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).hexdigest()


MARKER = "\u27e6{}\u27e7"  # "⟦<region id>⟧" inside a reference, numbered per question by ``number_markers``
_MARKER = re.compile("\u27e6([^\u27e7]+)\u27e7")


def references(regions: list[Region]) -> dict[str, str]:
    """region_id -> noun phrase naming exactly that region in its image (regions not nameable are absent)."""
    by_label: dict[str, list[Region]] = {}
    for r in regions:
        if r.label:
            by_label.setdefault(r.label, []).append(r)
    words = attribute_words()
    refs: dict[str, str] = {}
    for r in regions:
        if not r.label:
            refs[r.region_id] = "the marked region " + MARKER.format(r.region_id)
        elif not r.subject:
            continue
        elif len(by_label[r.label]) == 1:
            refs[r.region_id] = f"the {r.label}"
        else:
            for attr in sorted(a for a in r.attributes if a in words):
                same = [o for o in by_label[r.label] if attr in o.attributes]
                if len(same) == 1:
                    refs[r.region_id] = f"the {attr} {r.label}"
                    break
    return refs


def described(r: Region, refs: dict[str, str]) -> str:
    """The reference a spatial or size question uses: "the white car" for a region named "the car" that has
    exactly one annotated colour (else one material), for about half of such regions (a stable coin), as
    wrong-attribute questions name their subject "the blue car" (so a named attribute carries no signal)."""
    ref = refs[r.region_id]
    if r.label and ref == f"the {r.label}" and flip(r.region_id, "described"):
        words = attribute_words()
        for category in ("color", "material"):
            values = sorted(a for a in r.attributes if words.get(a) == category)
            if len(values) == 1:
                return f"the {values[0]} {r.label}"
    return ref


def number_markers(c: Candidate) -> None:
    """Replace each region marker of the question and answer by the region's 1-based position in the evidence."""
    def number(match: re.Match) -> str:
        return str(c.evidence.index(match[1]) + 1)

    c.question, c.answer = _MARKER.sub(number, c.question), _MARKER.sub(number, c.answer)


def _bare(ref: str) -> str:
    return ref[4:] if ref.startswith("the ") else ref


@lru_cache(maxsize=1 << 16)
def be_ref(ref: str) -> str:
    """"are" when a reference names a plural thing ("the white pants"), else "is" (a marked region is one)."""
    return "is" if _MARKER.search(ref) else be(_bare(ref))


def flip(*parts: str) -> bool:
    """A stable coin: True for about half of the keys (which option of an "A or B" question comes first)."""
    return int(stable_order(*parts, "flip"), 16) % 2 == 1


def pick(options: list, *parts: str):
    """One of ``options`` by a stable hash of ``parts``."""
    return options[int(stable_order(*parts), 16) % len(options)]


_Option = TypeVar("_Option", bound=tuple)


def pick_form(options: list[_Option], weights: dict[str, int] | None, *parts: str) -> _Option:
    """One (task type, form, question) option, drawn by a stable hash in proportion to ``weights[form]`` (how many
    real questions of the image take that form), so hallucination questions take each form about as often as real
    ones do and the form carries no signal; uniform where no option's form has a real question."""
    weights = weights or {}
    total = sum(weights.get(o[1], 0) for o in options)
    if not total:
        return pick(options, *parts)
    point = int(stable_order(*parts), 16) % total
    for option in options:
        point -= weights.get(option[1], 0)
        if point < 0:
            return option
    return options[-1]


def form_weights(candidates: list[Candidate]) -> dict[str, dict[str, int]]:
    """image -> form -> kept real candidates of that form (the weights of ``pick_form``)."""
    out: dict[str, dict[str, int]] = {}
    for c in candidates:
        if c.reason is None and not c.is_hallucination:
            forms = out.setdefault(c.image_id, {})
            forms[c.form] = forms.get(c.form, 0) + 1
    return out


def capital(text: str) -> str:
    return text[0].upper() + text[1:]


_SPATIAL_OPTIONS = {"horizontal": ("to the left", "to the right", " of"), "vertical": ("above", "below", ""),
                    "depth": ("in front of", "behind", "")}


def spatial_question(ref_a: str, ref_b: str, axis: str, swap: bool) -> str:
    """"Is A to the left or to the right of B?" (options in the other order when ``swap``), "Are" for a plural A."""
    first, second, tail = _SPATIAL_OPTIONS[axis]
    if swap:
        first, second = second, first
    return capital(f"{be_ref(ref_a)} {ref_a} {first} or {second}{tail} {ref_b}?")


def larger_question(ref_a: str, ref_b: str) -> str:
    """The size comparison, options in the order given."""
    return f"Which appears larger in the image, {ref_a} or {ref_b}?"


def count_question(plural_phrase: str) -> str:
    """"How many cars are there in the image?"."""
    return f"How many {plural_phrase} are there in the image?"


def attribute_question(ref: str, category: str) -> str:
    """"What color is the car?" / "What are the pants made of?"."""
    return f"What color {be_ref(ref)} {ref}?" if category == "color" else f"What {be_ref(ref)} {ref} made of?"


def subject_regions(regions: list[Region]) -> list[Region]:
    """Labeled regions whose label is an object class (object_classes.py): the only ones questions name."""
    return [r for r in regions if r.label and r.subject]


def counting(regions: list[Region], config: GroundedConfig) -> list[Candidate]:
    """One candidate per class of the image (every region of the class, however its annotator spelled it)."""
    out = []
    by_label: dict[str, list[Region]] = {}
    for r in subject_regions(regions):
        assert r.label is not None  # subject regions are labeled
        by_label.setdefault(r.label, []).append(r)
    for label, rs in sorted(by_label.items()):
        c = Candidate(rs[0].image_id, "counting", count_question(plural(label)), str(len(rs)),
                      [r.region_id for r in rs], detail={"class": plural(label)}, form="count")
        if not countable(label):
            c.reason = "uncountable"
        elif len(rs) > config.max_count:
            c.reason = "count_too_large"
        elif any(box_iou(a, b) >= config.duplicate_iou for a, b in itertools.combinations(rs, 2)):
            c.reason = "duplicate_boxes"
        out.append(c)
    return out


def class_counts(candidates: list[Candidate]) -> dict[str, list[str]]:
    """plural label -> evidence of the counting candidates that were kept."""
    return {c.detail["class"]: c.evidence for c in candidates
            if c.task_type == "counting" and c.reason is None and "class" in c.detail}


def spatial_pairs(regions: list[Region], refs: dict[str, str], image: dict, config: GroundedConfig) -> list[Candidate]:
    """Left/right, above/below and (with depth) in front of/behind for pairs of nameable regions.

    Pairs are examined in a stable hash order; examination stops once ``max_pairs_per_image``
    candidates were kept, so rejects count only the pairs looked at.
    """
    named = [r for r in regions if r.region_id in refs]
    pairs = sorted(itertools.permutations(named, 2), key=lambda p: stable_order(p[0].region_id, p[1].region_id))
    out, kept = [], 0
    width, height = image.get("width") or 0, image.get("height") or 0
    for a, b in pairs:
        if kept >= config.max_pairs_per_image:
            break
        if refs[a.region_id] == refs[b.region_id]:
            continue
        axes = ["horizontal", "vertical"] + (["depth"] if a.depth is not None and b.depth is not None else [])
        axis = axes[int(stable_order(a.region_id, b.region_id, "axis"), 16) % len(axes)]
        question = spatial_question(described(a, refs), described(b, refs), axis, flip(a.region_id, b.region_id))
        answer = spatial_answer(a, b, axis, width, height, config)
        c = Candidate(a.image_id, "spatial", question, answer or "", [a.region_id, b.region_id], detail={"axis": axis},
                      form="spatial")
        if answer is None:
            c.reason = "ambiguous_spatial"
        else:
            kept += 1
        out.append(c)
    return out


def spatial_answer(a: Region, b: Region, axis: str, width: float, height: float, config: GroundedConfig) -> str | None:
    """Where ``a`` is relative to ``b`` along ``axis``; None when the boxes are closer than the margin."""
    if axis == "horizontal":
        gap = config.spatial_margin * width
        return "left" if a.right + gap <= b.x else "right" if b.right + gap <= a.x else None
    if axis == "vertical":
        gap = config.spatial_margin * height
        return "above" if a.bottom + gap <= b.y else "below" if b.bottom + gap <= a.y else None
    assert a.depth is not None and b.depth is not None, "the depth axis is asked only of regions with depth"
    if abs(a.depth - b.depth) < config.depth_margin_m:
        return None
    return "in front of" if a.depth < b.depth else "behind"


def nearest_of_class(regions: list[Region], image: dict, config: GroundedConfig) -> list[Candidate]:
    """"Which of the 3 cars is nearest to the camera: the leftmost, the middle or the rightmost one?"
    for classes with 2-3 instances that all have depth, in a clear left-to-right order."""
    out = []
    by_label: dict[str, list[Region]] = {}
    subjects = subject_regions(regions)
    for r in subjects:
        assert r.label is not None  # subject regions are labeled
        if r.depth is not None:
            by_label.setdefault(r.label, []).append(r)
    for label, rs in sorted(by_label.items()):
        if len(rs) not in _ORDINALS or len(rs) != sum(r.label == label for r in subjects):
            continue
        rs = sorted(rs, key=lambda r: r.x)
        names = _ORDINALS[len(rs)]
        shown = names[::-1] if flip(rs[0].image_id, label, "nearest") else names
        options = ", the ".join(shown[:-1]) + f" or the {shown[-1]}"
        question = f"Which of the {len(rs)} {plural(label)} is nearest to the camera: the {options} one?"
        depths = [r.depth for r in rs if r.depth is not None]
        assert len(depths) == len(rs)  # by_label holds regions with depth only
        by_depth = sorted(range(len(rs)), key=lambda i: depths[i])
        c = Candidate(rs[0].image_id, "spatial", question, f"the {names[by_depth[0]]} one", [r.region_id for r in rs],
                      detail={"axis": "nearest"}, form="nearest")
        gap = config.spatial_margin * (image.get("width") or 0)
        if any(left.right + gap > right.x for left, right in zip(rs, rs[1:])):
            c.reason = "ambiguous_spatial"
        elif depths[by_depth[1]] - depths[by_depth[0]] < config.depth_margin_m:
            c.reason = "ambiguous_spatial"
        out.append(c)
    return out


def comparisons(regions: list[Region], refs: dict[str, str], counts: dict[str, list[str]],
                config: GroundedConfig) -> list[Candidate]:
    """Size comparison of two nameable regions and count comparison of two counted classes; the option
    named first is drawn by a stable hash (evidence in the order named)."""
    out = []
    named = [r for r in regions if r.region_id in refs]
    pairs = sorted(itertools.combinations(named, 2), key=lambda p: stable_order(p[0].region_id, p[1].region_id, "size"))
    kept = 0
    for a, b in pairs:
        if kept >= config.max_pairs_per_image:
            break
        if refs[a.region_id] == refs[b.region_id] or (a.label and a.label == b.label):
            continue
        if flip(a.region_id, b.region_id, "size"):
            a, b = b, a
        big, small = (a, b) if a.area >= b.area else (b, a)
        c = Candidate(a.image_id, "comparison", larger_question(described(a, refs), described(b, refs)),
                      _bare(described(big, refs)), [a.region_id, b.region_id], detail={"compare": "size"}, form="larger")
        if small.area <= 0 or big.area / small.area < config.size_ratio:
            c.reason = "ambiguous_size"
        else:
            kept += 1
        out.append(c)
    image_id = regions[0].image_id if regions else ""
    labels = sorted(counts)
    kept = 0
    for pa_, pb in sorted(itertools.combinations(labels, 2), key=lambda p: stable_order(image_id, *p)):
        if kept >= config.max_pairs_per_image:
            break
        if flip(image_id, pa_, pb, "count"):
            pa_, pb = pb, pa_
        na, nb = len(counts[pa_]), len(counts[pb])
        c = Candidate(image_id, "comparison", f"Are there more {pa_} or more {pb} in the image?",
                      pa_ if na > nb else pb, counts[pa_] + counts[pb], detail={"compare": "count"}, form="more")
        if na == nb:
            c.reason = "equal_counts"
        else:
            kept += 1
        out.append(c)
    return out


def attribute_questions(regions: list[Region], refs: dict[str, str]) -> list[Candidate]:
    """Attribute questions about named regions, and identification questions by a unique attribute.

    A region named by its label alone is asked about each family (color, material) it has one value
    of; where it also has a value of the other family, the question names it by that value ("What
    color is the wooden table?") for about half of the regions, as wrong-attribute questions do. A
    region named "the <attribute> <label>" is asked only about the other family.
    """
    words = attribute_words()
    out = []
    for r in subject_regions(regions):
        assert r.label is not None  # subject regions are labeled
        ref = refs.get(r.region_id)
        if ref is None or _MARKER.search(ref):
            continue
        values = {cat: sorted(a for a in r.attributes if words.get(a) == cat) for cat in ("color", "material")}
        qualifier = _bare(ref)[:-len(r.label)].strip()
        for category in sorted(cat for cat, v in values.items() if v):
            if qualifier and words.get(qualifier) == category:
                continue
            other = values["material" if category == "color" else "color"]
            asked = ref
            if not qualifier and len(other) == 1 and flip(r.region_id, category, "qualified"):
                asked = f"the {other[0]} {r.label}"
            c = Candidate(r.image_id, "attribute", attribute_question(asked, category), values[category][0], [r.region_id],
                          form=category)
            if len(values[category]) > 1:
                c.reason = "several_attribute_values"
            out.append(c)
    holders: dict[str, list[Region]] = {}
    for r in subject_regions(regions):
        for a in r.attributes:
            if a in words:
                holders.setdefault(a, []).append(r)
    for attr, rs in sorted(holders.items()):
        label = rs[0].label
        assert label is not None  # holders are subject regions, which are labeled
        noun = "object" if words[attr] == "color" else "thing"
        c = Candidate(rs[0].image_id, "identification", f"What is the {attr} {noun} in the image?", label,
                      [r.region_id for r in rs], form="identify")
        if len({r.label for r in rs}) > 1:
            c.reason = "ambiguous_identification"
        elif len(rs) > 1:
            c.question = f"What are the {attr} {noun}s in the image?"
            c.answer = plural(label)
        out.append(c)
    return out


def image_candidates(regions: list[Region], image: dict, config: GroundedConfig) -> list[Candidate]:
    """Every rule-based candidate of one image, for the configured task types (region markers numbered)."""
    refs = references(regions)
    count = counting(regions, config)
    found = count + spatial_pairs(regions, refs, image, config) + nearest_of_class(regions, image, config)
    found += comparisons(regions, refs, class_counts(count), config) + attribute_questions(regions, refs)
    found = [c for c in found if c.task_type in config.task_types]
    for c in found:
        number_markers(c)
    return found


def mark_duplicates(candidates: list[Candidate]) -> None:
    """Reject a second kept candidate with the same image and question (``duplicate_question``)."""
    seen: set[tuple[str, str]] = set()
    for c in candidates:
        if c.reason is None:
            key = (c.image_id, c.question)
            if key in seen:
                c.reason = "duplicate_question"
            seen.add(key)


def to_rows(candidates: list[Candidate], sources: dict[str, str], objects_of: dict[str, str], kind: str = KIND,
            generator_model: str | None = None) -> pa.Table:
    """Kept candidates as QUESTIONS rows, sorted by question_id (built column by column)."""
    kept = [c for c in candidates if c.reason is None]
    ids = [question_id(kind, c.image_id, c.task_type, c.question, c.answer) for c in kept]
    order = sorted(range(len(kept)), key=ids.__getitem__)  # stable, as a sort of the rows by question_id
    kept = [kept[i] for i in order]
    n = len(kept)
    objects = [sorted({objects_of[r] for r in c.evidence if r in objects_of}) for c in kept]
    columns: dict[str, list] = {
        "question_id": [ids[i] for i in order], "image_id": [c.image_id for c in kept],
        "image_source": [sources.get(c.image_id) for c in kept], "object_ids": objects,
        "question": [c.question for c in kept], "answer": [c.answer for c in kept],
        "answer_category": ["number" if c.task_type == "counting" and c.answer.isdigit() else "literal" for c in kept],
        "n_hop": [0] * n, "has_scene_graph": [False] * n, "template_version": [rules_version()] * n, "kind": [kind] * n,
        "generator_model": [generator_model] * n, "evidence_object_ids": objects,
        "task_type": [c.task_type for c in kept], "evidence_region_ids": [c.evidence for c in kept],
        "is_hallucination": [c.is_hallucination for c in kept],
        "template_ids": [[c.template_id] if c.template_id else None for c in kept],
        "absence_basis": [c.detail.get("absence_basis") if c.is_hallucination else None for c in kept],
        "absence_evidence": [evidence_text(c.detail.get("absence_evidence")) if c.is_hallucination else None
                             for c in kept],
    }
    return pa.table({f.name: pa.array(columns.get(f.name, [None] * n), f.type) for f in schemas.QUESTIONS},
                    schema=schemas.QUESTIONS)


def reject_table(reasons: list[str], locations: list[str], records: list[dict]) -> pa.Table:
    """(reason, source, record) rows for ``Rejects.add_table``, each record JSON as ``Rejects.add`` writes it."""
    return pa.table({"reason": pa.array(reasons, pa.string()), "source": pa.array(locations, pa.string()),
                     "record": pa.array([_RECORD_JSON(r) for r in records], pa.string())})


def add_rejects(rejects: Rejects, candidates: list[Candidate], source_file: str) -> None:
    """One reject per rejected candidate, located by file and image."""
    rejected = [c for c in candidates if c.reason is not None]
    rejects.add_table(reject_table(
        [c.reason for c in rejected if c.reason is not None], [f"{source_file}#{c.image_id}" for c in rejected],
        [{"task_type": c.task_type, "question": c.question, "answer": c.answer, "evidence": c.evidence,
          **({"template_id": c.template_id} if c.template_id else {}), **c.detail} for c in rejected]))
