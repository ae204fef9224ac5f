"""GroundingDINO text prompts: tags -> ``a . b . c .`` captions in passes under the token limit,
and the box -> class mapping over each class's character span (never thresholded sub-words).

Works with any Hugging Face *fast* tokenizer (offset mappings); GroundingDINO uses BERT's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

SEPARATOR = " . "
MAX_TEXT_LEN = 256  # GroundingDINO's max_text_len: longer captions are cut silently by the model


@dataclass(frozen=True)
class Prompt:
    """One caption and where each class sits in it (character spans, end exclusive)."""

    caption: str
    classes: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


def normalize_tag(tag: str) -> str:
    """Lowercase, collapse whitespace, drop the separator character '.' (it would split a class)."""
    return re.sub(r"\s+", " ", tag.replace(".", " ")).strip().lower()


def unique_tags(tags: Sequence[str]) -> list[str]:
    """Normalized tags, empty ones dropped, first occurrence kept."""
    seen: dict[str, None] = {}
    for tag in tags:
        name = normalize_tag(tag)
        if name:
            seen.setdefault(name, None)
    return list(seen)


def build_prompt(classes: Sequence[str]) -> Prompt:
    """``a . b . c .`` with the character span of every class."""
    spans, start = [], 0
    for name in classes:
        spans.append((start, start + len(name)))
        start += len(name) + len(SEPARATOR)
    return Prompt(SEPARATOR.join(classes) + " .", tuple(classes), tuple(spans))


def token_count(tokenizer: Any, caption: str) -> int:
    """Tokens of ``caption`` as the model sees them, [CLS] and [SEP] included."""
    return len(tokenizer(caption, add_special_tokens=True)["input_ids"])


def split_passes(tags: Sequence[str], tokenizer: Any, max_tokens: int = MAX_TEXT_LEN) -> tuple[list[Prompt], list[str]]:
    """Pack tags in order into prompts of at most ``max_tokens`` tokens each.

    Returns the prompts and the tags that do not fit even alone (callers record them).
    A tag costs its own tokens plus one for the following ' .'; each caption adds 2 for
    [CLS] and [SEP]. Counts are checked against the tokenizer on the finished caption.
    """
    classes = unique_tags(tags)
    if not classes:
        return [], []
    costs = [len(tokenizer(name, add_special_tokens=False)["input_ids"]) + 1 for name in classes]
    passes: list[list[str]] = []
    too_long: list[str] = []
    current: list[str] = []
    used = 2
    for name, cost in zip(classes, costs):
        if cost + 2 > max_tokens:
            too_long.append(name)
            continue
        if used + cost > max_tokens:
            passes.append(current)
            current, used = [], 2
        current.append(name)
        used += cost
    if current:
        passes.append(current)
    prompts = [build_prompt(p) for p in passes]
    for prompt in prompts:
        count = token_count(tokenizer, prompt.caption)
        if count > max_tokens:  # a tokenizer that merges across ' . ' would break the estimate
            raise ValueError(f"caption of {count} tokens exceeds {max_tokens}: {prompt.caption[:80]!r}")
    return prompts, too_long


def class_token_mask(prompt: Prompt, tokenizer: Any, max_text_len: int = MAX_TEXT_LEN) -> np.ndarray:
    """Boolean ``(classes, max_text_len)``: which token positions fall inside each class's span.

    Positions are those of the tokenized caption with special tokens, as the model indexes
    its logits. A token belongs to a class when its character offsets lie within the span.
    """
    encoded = tokenizer(prompt.caption, add_special_tokens=True, return_offsets_mapping=True)
    offsets = np.asarray(encoded["offset_mapping"], dtype=np.int64).reshape(-1, 2)[:max_text_len]
    starts, ends = offsets[:, 0], offsets[:, 1]
    mask = np.zeros((len(prompt.classes), max_text_len), dtype=bool)
    real = ends > starts  # special tokens have (0, 0)
    for k, (start, end) in enumerate(prompt.spans):
        inside = real & (starts >= start) & (ends <= end)
        mask[k, : len(offsets)] = inside
        if not inside.any():
            raise ValueError(f"class {prompt.classes[k]!r} has no token in the caption")
    return mask


@dataclass(frozen=True)
class ClassAssignment:
    """Per box: class index, class score (max prob over the class's tokens), box score (max over all); per class:
    ``best``, its highest token probability over every box (what a negative of that class reports)."""

    label: np.ndarray
    class_score: np.ndarray
    box_score: np.ndarray
    best: np.ndarray


def assign_classes(probs: np.ndarray, mask: np.ndarray) -> ClassAssignment:
    """Each box's class: the argmax over classes of the max token probability in the class's span.

    ``probs``: ``(boxes, max_text_len)`` sigmoid token probabilities. Ties go to the class
    that comes first in the caption.
    """
    probs = np.asarray(probs, dtype=np.float64)
    per_class = np.where(mask[None, :, :], probs[:, None, :], -np.inf).max(axis=2)  # (boxes, classes)
    label = per_class.argmax(axis=1) if len(mask) else np.zeros(len(probs), dtype=np.int64)
    class_score = per_class[np.arange(len(probs)), label] if len(mask) else np.zeros(len(probs))
    best = per_class.max(axis=0) if len(probs) else np.zeros(len(mask))
    return ClassAssignment(label, class_score, probs.max(axis=1) if probs.size else np.zeros(len(probs)), best)
