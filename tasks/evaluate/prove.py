"""PROVE's scores of free-form answers (PROVE, section 3.2, equations 1 and 2): hscore and tscore.

Tuples are scene-graph facts: an entity ``(e,)``, an attribute ``(e, a)``, a relation ``(s, r, o)``;
a tuple is embedded as its parts joined by spaces (``"dog lying on grass"``), and similarity is the
cosine of sentence-transformers embeddings (the project's offline all-MiniLM-L6-v2, ``Embedder``).

- ``hscore`` (helpfulness, recall): the mean over the reference answer's tuples that the question does
  not already state, g(A) - g(Q), of the best similarity to any response tuple g(Â).
- ``tscore`` (truthfulness, precision): the mean over the response's tuples of the best similarity to
  any tuple of the image's scene graph g(C). PROVE also takes the max with a visual entailment
  model's p(I |= t') (OFA); no such model runs here, so our tscore is the graph term alone (a lower
  bound of the paper's).

Tuples of the answer, the question and the response are extracted by an LLM prompted with an
in-context example (``templates/prompts/extract_tuples.md``; PROVE used LLaMA-3.1), one request per
distinct text through ``LLMClient.complete_many`` and its cache. A reply is read strictly (one JSON
object ``{"tuples": [[...], ...]}``, each tuple one to three non-empty strings); a broken reply
leaves that question unscored and named in ``ProveResult.errors``.

Edge cases (our choices, the paper does not say): when the question states every answer tuple,
hscore recalls g(A) whole; an answer with no tuple cannot be scored (error); a response with no
tuple scores (0, 0): it recalls nothing and makes no checkable claim.

Where g(C) comes from: a release does not keep the scene graphs that verified questions were
generated from (they stay in build-verified-qa's input and its work folder, ``graphs/``). Pass them as
``graphs`` (``load_graphs`` reads the tuple JSONL that build-verified-qa takes or the work folder's
graph shards). Without a graph for an image, g(C) is rebuilt from the release: the tuples of every
verified reference answer of that image (each was checked against the graph by its program) and the
image's regions (label as an entity, each attribute of the region). ``ProveResult.graph_source`` says
which was used per question.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence

import numpy as np
import pyarrow.parquet as pq

from reasonvqa.call_cache import CallCache
from reasonvqa.llm import LLMClient, parse_json_output
from reasonvqa.tasks.evaluate.judge import cache_or_temporary
from reasonvqa.templates.prompt_loader import render

EXTRACT_PROMPT = "extract_tuples"
SceneTuple = tuple[str, ...]


class TextEmbedder(Protocol):
    """What the scores need of an embedding model: one vector per text."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


def normalize_tuple(parts: Iterable[Any]) -> SceneTuple:
    """Lower-cased parts with single spaces (so ``("Dog",)`` and ``("dog ",)`` are one tuple)."""
    return tuple(" ".join(str(part).lower().split()) for part in parts)


def tuple_text(item: SceneTuple) -> str:
    """The text a tuple is embedded as: its parts joined by spaces."""
    return " ".join(item)


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def similarity_matrix(left: Sequence[SceneTuple], right: Sequence[SceneTuple], embedder: TextEmbedder) -> np.ndarray:
    """Cosine similarity of every (left, right) pair of tuples, each distinct text encoded once."""
    texts = sorted({tuple_text(t) for t in (*left, *right)})
    index = {text: i for i, text in enumerate(texts)}
    vectors = _unit_rows(np.asarray(embedder.encode(texts), dtype=np.float64))
    return vectors[[index[tuple_text(t)] for t in left]] @ vectors[[index[tuple_text(t)] for t in right]].T


def tuple_scores(answer: Sequence[SceneTuple], question: Sequence[SceneTuple], response: Sequence[SceneTuple],
                 image: Sequence[SceneTuple], embedder: TextEmbedder) -> tuple[float, float]:
    """(hscore, tscore) of one response from its tuples (PROVE eq. 1 and 2, graph term only; see the
    module docstring for the edge cases). Raises ``ValueError`` when the answer has no tuple."""
    answer_set = list(dict.fromkeys(normalize_tuple(t) for t in answer))
    premises = {normalize_tuple(t) for t in question}
    target = [t for t in answer_set if t not in premises] or answer_set
    if not target:
        raise ValueError("the reference answer has no tuple")
    claims = list(dict.fromkeys(normalize_tuple(t) for t in response))
    if not claims:
        return 0.0, 0.0
    hscore = float(similarity_matrix(target, claims, embedder).max(axis=1).mean())
    graph = list(dict.fromkeys(normalize_tuple(t) for t in image))
    tscore = float(similarity_matrix(claims, graph, embedder).max(axis=1).mean()) if graph else 0.0
    return hscore, tscore


class EncodedOnce:
    """An embedder over texts encoded in one batch up front (a text not among them is encoded on demand)."""

    def __init__(self, embedder: TextEmbedder, texts: list[str]) -> None:
        self.embedder = embedder
        vectors = np.asarray(embedder.encode(texts)) if texts else np.zeros((0, 0))
        self.vectors = dict(zip(texts, vectors))

    def encode(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if new:
            self.vectors.update(zip(new, np.asarray(self.embedder.encode(new))))
        return np.stack([self.vectors[t] for t in texts])


# --- tuple extraction ----------------------------------------------------------------------------

def read_tuples(reply: str) -> list[SceneTuple] | None:
    """The tuples of an extraction reply; None unless it is exactly ``{"tuples": [[1-3 strings], ...]}``."""
    value = parse_json_output(reply)
    if not isinstance(value, dict) or not isinstance(value.get("tuples"), list):
        return None
    found = []
    for item in value["tuples"]:
        if not (isinstance(item, list) and 1 <= len(item) <= 3
                and all(isinstance(part, str) and part.strip() for part in item)):
            return None
        found.append(normalize_tuple(item))
    return found


@dataclass
class Extraction:
    """Tuples per distinct text; ``errors`` names each text whose reply was not a valid tuple list."""

    tuples: dict[str, list[SceneTuple]]
    errors: dict[str, str] = field(default_factory=dict)


def extract_tuples(client: LLMClient, texts: Iterable[str], cache: CallCache | None = None) -> Extraction:
    """Scene-graph tuples of each distinct text, one LLM request per text (cached, concurrent)."""
    unique = sorted(set(texts))
    with cache_or_temporary(cache, "tuples") as calls:
        replies = client.complete_many([render(EXTRACT_PROMPT, text=text) for text in unique], calls)
    result = Extraction(tuples={})
    for text, reply in zip(unique, replies):
        found = read_tuples(reply)
        if found is None:
            result.errors[text] = f"extraction_broken: {reply[:200]!r}"
        else:
            result.tuples[text] = found
    return result


# --- the image's scene graph ---------------------------------------------------------------------

def _values(value: Any) -> list[str]:
    """Values of the tuple form's ``[v, ...]`` or typed ``{type: v | [v, ...]}`` (see scene_graph.py)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None]
    if isinstance(value, dict):
        return [v for vals in value.values() for v in _values(vals)]
    raise ValueError(f"expected a string, list or object, got {type(value).__name__}")


def graph_tuples(graph: Mapping[str, Any]) -> list[SceneTuple]:
    """The tuples of a scene graph in the tuple form (bare, or as ``{"scene_graph": ...}`` of SceneGraph.to_json):
    each entity, each (entity, attribute value) and each (source, relation, target); a DSG comparison
    value (``==several``) loses its operator."""
    inner = graph.get("scene_graph")
    tuples_form: Mapping[str, Any] = inner if isinstance(inner, dict) else graph
    found: list[SceneTuple] = []
    for entity, meta in tuples_form.items():
        if not isinstance(meta, dict):
            raise ValueError(f"entity {entity!r}: expected an object with attributes and relations_to")
        found.append(normalize_tuple([entity]))
        found += [normalize_tuple([entity, value.lstrip("=!<> ")]) for value in _values(meta.get("attributes"))]
        for target, relations in (meta.get("relations_to") or {}).items():
            found += [normalize_tuple([entity, relation, target]) for relation in _values(relations) or ["related to"]]
    return list(dict.fromkeys(found))


def load_graphs(path: Path) -> dict[str, dict]:
    """Scene graphs by image id from build-verified-qa's tuple JSONL (``image_id``, ``scene_graph``) or
    from Parquet with ``image_id`` and ``graph`` (JSON text; the work folder's ``graphs/`` shards, a file
    or a folder). A line or row without them raises ``ValueError`` naming file and line."""
    path = Path(path)
    graphs: dict[str, dict] = {}
    if path.suffix in (".jsonl", ".json"):
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    graphs[str(record["image_id"])] = record["scene_graph"]
                except (ValueError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}:{number}: not a scene-graph line ({error})") from None
        return graphs
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    for file in files:
        for number, row in enumerate(pq.read_table(file, columns=["image_id", "graph"]).to_pylist()):
            try:
                graphs[str(row["image_id"])] = json.loads(row["graph"])
            except (ValueError, TypeError) as error:
                raise ValueError(f"{file}: row {number}: graph is not JSON ({error})") from None
    return graphs


def region_tuples(release: Path, image_ids: Iterable[str]) -> dict[str, list[SceneTuple]]:
    """Entity and attribute tuples of the release's regions of these images (none without ``regions/``)."""
    folder = Path(release) / "regions"
    wanted = sorted(set(image_ids))
    if not folder.is_dir() or not wanted:
        return {}
    table = pq.read_table(folder, columns=["image_id", "label", "attributes"], filters=[("image_id", "in", wanted)])
    found: dict[str, list[SceneTuple]] = {}
    for row in table.to_pylist():
        if row["label"]:
            tuples = found.setdefault(row["image_id"], [])
            tuples.append(normalize_tuple([row["label"]]))
            tuples += [normalize_tuple([row["label"], a]) for a in row["attributes"] or [] if a]
    return found


# --- scoring a release's verified questions ------------------------------------------------------

@dataclass
class ProveResult:
    """``scores``: question_id -> (hscore, tscore) for each scored question; ``errors``: question_id ->
    why it was not scored; ``graph_source``: question_id -> ``scene_graph`` or ``release`` (the g(C) used)."""

    scores: dict[str, tuple[float, float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    graph_source: dict[str, str] = field(default_factory=dict)


def prove_scores(release: Path, rows: list[dict], answers: Mapping[str, str], client: LLMClient, *,
                 cache: CallCache | None = None, embedder: TextEmbedder | None = None,
                 graphs: Mapping[str, Mapping[str, Any]] | None = None) -> ProveResult:
    """hscore and tscore of ``answers`` (question_id -> response) on the release's verified ``rows``
    (dicts with question_id, image_id, question, answer), with the details (see the module docstring)."""
    result = ProveResult()
    scored = []
    for row in rows:
        if row["question_id"] in answers:
            scored.append(row)
        else:
            result.errors[row["question_id"]] = "no_prediction"
    graphs = graphs or {}
    extraction = extract_tuples(client, [text for row in rows for text in (row["question"], row["answer"])]
                                + [answers[row["question_id"]] for row in scored], cache)
    missing = {row["image_id"] for row in scored if row["image_id"] not in graphs}
    fallback = region_tuples(release, missing)
    for row in rows:
        if row["image_id"] in missing:
            fallback.setdefault(row["image_id"], []).extend(extraction.tuples.get(row["answer"], []))
    if embedder is None:
        from reasonvqa.text_filters import Embedder

        embedder = Embedder()
    every = [t for found in (*extraction.tuples.values(), *fallback.values()) for t in found]
    every += [t for image_id in {row["image_id"] for row in scored} & set(graphs) for t in graph_tuples(graphs[image_id])]
    embedder = EncodedOnce(embedder, sorted({tuple_text(t) for t in every}))
    for row in scored:
        qid, response = row["question_id"], answers[row["question_id"]]
        broken = [f"{part} {extraction.errors[text]}" for part, text in
                  (("question", row["question"]), ("answer", row["answer"]), ("response", response))
                  if text in extraction.errors]
        if broken:
            result.errors[qid] = "; ".join(broken)
            continue
        if row["image_id"] in graphs:
            image, result.graph_source[qid] = graph_tuples(graphs[row["image_id"]]), "scene_graph"
        else:
            image, result.graph_source[qid] = fallback.get(row["image_id"], []), "release"
        try:
            result.scores[qid] = tuple_scores(extraction.tuples[row["answer"]], extraction.tuples[row["question"]],
                                              extraction.tuples[response], image, embedder)
        except ValueError as error:
            result.errors[qid] = f"answer_no_tuples: {error}"
            result.graph_source.pop(qid, None)
    return result


def score_prove(release: Path, rows: list[dict], answers: dict[str, str], client: LLMClient, *,
                cache: CallCache | None = None, embedder: TextEmbedder | None = None,
                graphs: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, tuple[float, float]]:
    """question_id -> (hscore, tscore) for every scorable verified question (``prove_scores`` for the
    questions left out and why)."""
    return prove_scores(release, rows, answers, client, cache=cache, embedder=embedder, graphs=graphs).scores
