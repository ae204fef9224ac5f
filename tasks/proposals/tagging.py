"""Image tagging behind one interface: which object classes to ask the box detector for.

Backends (``TaggingConfig.backend``):

- ``labels``: the image's own annotated object labels (dataset labels);
- ``vocabulary``: a configured class list, the same for every image;
- ``open_clip``: an open-clip-torch model scoring the configured vocabulary against the image;
- ``ram_plus``: RAM++ from a local checkout of recognize-anything (not on the package index).

Every backend's tags pass through the stop-list (scenes, colours, materials, actions).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from reasonvqa.tasks.proposals.config import TaggingConfig
from reasonvqa.tasks.proposals.prompts import normalize_tag, unique_tags


@dataclass(frozen=True)
class TagRequest:
    """One image to tag: its id, its pixels (a PIL image, when the backend needs them), its labels."""

    image_id: str
    image: Any
    labels: tuple[str, ...] = ()


def load_stop_list(path: Path, extra: Sequence[str] = ()) -> frozenset[str]:
    """Normalized tags of a stop-list file (one per line, '#' comments) plus ``extra``."""
    tags = {normalize_tag(line.split("#", 1)[0]) for line in Path(path).read_text(encoding="utf-8").splitlines()}
    tags.update(normalize_tag(t) for t in extra)
    tags.discard("")
    return frozenset(tags)


def apply_stop_list(tags: Sequence[str], stop: frozenset[str]) -> tuple[list[str], list[str]]:
    """Split normalized, de-duplicated tags into (kept, stop-listed), both in input order."""
    kept: list[str] = []
    dropped: list[str] = []
    for tag in unique_tags(tags):
        (dropped if tag in stop else kept).append(tag)
    return kept, dropped


class Tagger(ABC):
    """A tagging backend. ``name`` goes into the regions' origin; ``needs_pixels`` says whether
    ``tag`` reads ``TagRequest.image``."""

    name: str
    needs_pixels: bool = True

    @abstractmethod
    def tag(self, requests: Sequence[TagRequest]) -> list[list[str]]:
        """Raw tags of every request (stop-list not yet applied), in request order."""


class LabelsTagger(Tagger):
    """The image's annotated object labels."""

    name = "labels"
    needs_pixels = False

    def tag(self, requests: Sequence[TagRequest]) -> list[list[str]]:
        return [list(r.labels) for r in requests]


class VocabularyTagger(Tagger):
    """The configured vocabulary for every image."""

    name = "vocabulary"
    needs_pixels = False

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.vocabulary = list(vocabulary)

    def tag(self, requests: Sequence[TagRequest]) -> list[list[str]]:
        return [list(self.vocabulary) for _ in requests]


class OpenClipTagger(Tagger):
    """open-clip-torch: the vocabulary tags whose softmax probability over the vocabulary
    reaches ``threshold`` (at most ``top_k``, highest first)."""

    def __init__(self, config: TaggingConfig, device: str) -> None:
        import open_clip
        import torch

        if config.open_clip_weights is None:
            raise ValueError("tagging.open_clip_weights: a local checkpoint file is required")
        self.name = f"open_clip:{config.open_clip_model}"
        self.torch = torch
        self.device = device
        self.config = config
        self.model, _, self.preprocess = open_clip.create_model_and_transforms(
            config.open_clip_model, pretrained=str(config.open_clip_weights), device=device)
        self.model.eval()
        tokenizer = open_clip.get_tokenizer(config.open_clip_model)
        self.vocabulary = unique_tags(config.vocabulary)
        if not self.vocabulary:
            raise ValueError("tagging.vocabulary: the open_clip backend scores a vocabulary; it is empty")
        texts = tokenizer([config.open_clip_template.format(tag) for tag in self.vocabulary]).to(device)
        with torch.no_grad():
            text = self.model.encode_text(texts)
        self.text = text / text.norm(dim=-1, keepdim=True)

    def tag(self, requests: Sequence[TagRequest]) -> list[list[str]]:
        torch = self.torch
        if not requests:
            return []
        batch = torch.stack([self.preprocess(r.image.convert("RGB")) for r in requests]).to(self.device)
        with torch.no_grad():
            image = self.model.encode_image(batch)
            image = image / image.norm(dim=-1, keepdim=True)
            probs = (self.model.logit_scale.exp() * image @ self.text.T).softmax(dim=-1).cpu().numpy()
        out = []
        for row in probs:
            order = sorted(range(len(row)), key=lambda k: (-row[k], k))[: self.config.top_k]
            out.append([self.vocabulary[k] for k in order if row[k] >= self.config.threshold])
        return out


class RamPlusTagger(Tagger):
    """RAM++ (recognize-anything) loaded from a local checkout and a local weights file.

    Not verified here: neither the code nor the weights are installable on the test machines.
    The checkout's tokenizer setup loads ``bert-base-uncased`` by name: give it a local
    Hugging Face cache (``HF_HOME``) holding that tokenizer and set ``HF_HUB_OFFLINE=1``.
    """

    name = "ram_plus"

    def __init__(self, config: TaggingConfig, device: str) -> None:
        if config.ram_checkout is None or config.ram_weights is None:
            raise ValueError("tagging.ram_checkout and tagging.ram_weights are required for the ram_plus backend")
        checkout = str(Path(config.ram_checkout).resolve())
        if checkout not in sys.path:
            sys.path.insert(0, checkout)
        import torch
        from ram import get_transform
        from ram.models import ram_plus

        self.torch = torch
        self.device = device
        self.transform = get_transform(image_size=config.ram_image_size)
        self.model = ram_plus(pretrained=str(config.ram_weights), image_size=config.ram_image_size, vit="swin_l")
        self.model.eval().to(device)

    def tag(self, requests: Sequence[TagRequest]) -> list[list[str]]:
        if not requests:
            return []
        batch = self.torch.stack([self.transform(r.image.convert("RGB")) for r in requests]).to(self.device)
        with self.torch.no_grad():
            tags, _ = self.model.generate_tag(batch)  # one " | "-joined English string per image
        return [[t.strip() for t in line.split("|") if t.strip()] for line in tags]


def build_tagger(config: TaggingConfig, device: str) -> Tagger:
    """The configured backend, loaded on ``device``."""
    if config.backend == "labels":
        return LabelsTagger()
    if config.backend == "vocabulary":
        return VocabularyTagger(config.vocabulary)
    if config.backend == "open_clip":
        return OpenClipTagger(config, device)
    return RamPlusTagger(config, device)
