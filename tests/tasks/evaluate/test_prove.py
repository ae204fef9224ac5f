"""PROVE's hscore and tscore: the tuple scores on a hand-computed two-tuple example, tuple extraction and
release scoring against a replaying OpenAI-compatible server on 127.0.0.1, and the real embedding model."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonvqa import schemas
from reasonvqa.call_cache import CallCache
from reasonvqa.llm import LLMClient, LLMConfig
from reasonvqa.tasks.evaluate.prove import (extract_tuples, graph_tuples, load_graphs, prove_scores, read_tuples,
                                            score_prove, tuple_scores)

from tests.tasks.verify.llm_server import FixtureLLM

# Hand-made unit vectors, so each cosine is a dot product that can be read off: the example's arithmetic
# is in the test below. The real model is tested apart (test_the_real_embedding_model_...).
E1, E2, E3, E4 = np.eye(4)
VECTORS = {
    "dog brown": E1, "dog small": E2, "dog large": 0.6 * E2 + 0.8 * E3, "dog big": 0.8 * E2 + 0.6 * E3,
    "dog": E4, "grass": 0.6 * E1 + 0.8 * E4, "dog on grass": E4,
}


class LiteralEmbedder:
    """The VECTORS table as an embedding model (counts the texts it is asked for)."""

    def __init__(self):
        self.asked: list[str] = []

    def encode(self, texts):
        self.asked += texts
        return np.stack([VECTORS[t] for t in texts])


QUESTION = [("dog",), ("grass",), ("dog", "on", "grass")]           # What color and size is the dog on the grass?
ANSWER = [*QUESTION, ("dog", "brown"), ("dog", "small")]             # The dog on the grass is brown and small.
RESPONSE = [("dog", "brown"), ("dog", "large")]                      # The dog is brown and large.
IMAGE = [("dog",), ("grass",), ("dog", "brown"), ("dog", "big"), ("dog", "on", "grass")]


def test_hscore_and_tscore_on_a_two_tuple_example():
    # g(A) - g(Q) = {dog brown, dog small}: the two tuples to recover.
    # hscore = (max(cos(dog brown, dog brown) = 1, cos(dog brown, dog large) = 0)
    #           + max(cos(dog small, dog brown) = 0, cos(dog small, dog large) = 0.6)) / 2 = 0.8
    # tscore: dog brown is in the graph (1); dog large is closest to dog big: 0.6*0.8 + 0.8*0.6 = 0.96;
    #         (1 + 0.96) / 2 = 0.98
    hscore, tscore = tuple_scores(ANSWER, QUESTION, RESPONSE, IMAGE, LiteralEmbedder())
    assert hscore == pytest.approx(0.8) and tscore == pytest.approx(0.98)
    # the question's premises do not count: a response that only repeats them recalls nothing new
    assert tuple_scores(ANSWER, QUESTION, [("dog", "on", "grass")], IMAGE, LiteralEmbedder())[0] == pytest.approx(0.0)
    # case and spacing do not make a tuple new; a question stating every answer tuple recalls g(A) whole
    assert tuple_scores([("Dog ", "brown")], [("dog", "brown")], [("dog", "brown")], IMAGE, LiteralEmbedder()) == \
        pytest.approx((1.0, 1.0))
    assert tuple_scores(ANSWER, QUESTION, [], IMAGE, LiteralEmbedder()) == (0.0, 0.0)  # no claim: nothing recalled
    with pytest.raises(ValueError, match="no tuple"):
        tuple_scores([], QUESTION, RESPONSE, IMAGE, LiteralEmbedder())


def test_the_real_embedding_model_ranks_a_faithful_response_above_an_unrelated_one():
    from reasonvqa.text_filters import Embedder

    embedder = Embedder()
    faithful = tuple_scores(ANSWER, QUESTION, [("dog", "brown"), ("dog", "small")], IMAGE + [("dog", "small")], embedder)
    assert faithful == pytest.approx((1.0, 1.0), abs=1e-5)
    unrelated = tuple_scores(ANSWER, QUESTION, [("airplane", "flying over", "ocean")], IMAGE, embedder)
    assert unrelated[0] < 0.5 and unrelated[1] < 0.5


@pytest.mark.parametrize("reply, tuples", [
    ('{"tuples": [["Dog"], ["dog", "brown"], ["dog", "on", "grass"]]}', [("dog",), ("dog", "brown"), ("dog", "on", "grass")]),
    ('{"tuples": []}', []),
    ('{"tuples": [["a", "b", "c", "d"]]}', None), ('{"tuples": [["dog", ""]]}', None), ('{"tuples": ["dog"]}', None),
    ('{"facts": []}', None), ("no JSON", None),
])
def test_extraction_replies_are_read_strictly(reply, tuples):
    assert read_tuples(reply) == tuples


def test_graph_tuples_of_both_tuple_forms():
    bare = {"cargo carts": {"attributes": {"count": ["==several"], "state": "grouped together"},
                            "relations_to": {"plane": {"spatial": ["in front of"]}}},
            "plane": {"attributes": ["blue"], "relations_to": {}}}
    expected = [("cargo carts",), ("cargo carts", "several"), ("cargo carts", "grouped together"),
                ("cargo carts", "in front of", "plane"), ("plane",), ("plane", "blue")]
    assert graph_tuples(bare) == expected
    assert graph_tuples({"caption": "", "scene_graph": bare, "object_ids": {}}) == expected


TEXTS = {
    "What color and size is the dog on the grass?": QUESTION,
    "The dog on the grass is brown and small.": ANSWER,
    "The dog is brown and large.": RESPONSE,
    "What is on the grass?": [("grass",)],
    "A dog is on the grass.": [("dog",), ("grass",), ("dog", "on", "grass")],
    "A big brown dog.": [("dog",), ("dog", "big"), ("dog", "brown")],
}


def _replies(broken: str | None = None):
    replies = {f"Text: {text}\n": json.dumps({"tuples": [list(t) for t in tuples]}) for text, tuples in TEXTS.items()}
    if broken:
        replies[f"Text: {broken}\n"] = '{"tuples": [["dog", "brown", "on", "grass"]]}'
    return replies


def _client(server):
    return LLMClient(LLMConfig(base_url=server.base_url, model="tuples-fixture", api_key_env="FIXTURE_KEY",
                               max_retries=1, backoff_seconds=0.01, concurrency=2))


def test_extraction_sends_one_request_per_distinct_text_and_caches_them(tmp_path):
    texts = ["The dog is brown and large.", "What is on the grass?", "The dog is brown and large."]
    with FixtureLLM(generations=_replies(broken="Is it?")) as server:
        client = _client(server)
        first = extract_tuples(client, [*texts, "Is it?"], CallCache(tmp_path / "tuples.jsonl"))
        assert len(server.requests) == 3
        prompts = [body["messages"][-1]["content"] for body in server.requests]  # arrival order varies (2 in flight)
        prompt = next(p for p in prompts if p.rstrip().endswith("Text: Is it?"))
        assert '["subject", "relation", "object"]' in prompt
        again = extract_tuples(client, texts, CallCache(tmp_path / "tuples.jsonl"))
        assert len(server.requests) == 3  # all from the cache
    assert first.tuples["The dog is brown and large."] == RESPONSE
    assert again.tuples == {t: first.tuples[t] for t in texts}
    assert list(first.errors) == ["Is it?"] and first.errors["Is it?"].startswith("extraction_broken: ")


ROWS = [
    {"question_id": "q1", "image_id": "img1", "question": "What color and size is the dog on the grass?",
     "answer": "The dog on the grass is brown and small."},
    {"question_id": "q2", "image_id": "img2", "question": "What color and size is the dog on the grass?",
     "answer": "The dog on the grass is brown and small."},
    {"question_id": "q3", "image_id": "img2", "question": "What is on the grass?", "answer": "A dog is on the grass."},
    {"question_id": "q4", "image_id": "img2", "question": "What is on the grass?", "answer": "A dog is on the grass."},
]


def _release_with_regions(tmp_path):
    release = tmp_path / "release"
    (release / "regions").mkdir(parents=True)
    regions = [{"region_id": "r1", "image_id": "img2", "label": "dog", "attributes": ["big"]},
               {"region_id": "r2", "image_id": "img9", "label": "cat", "attributes": None}]
    pq.write_table(pa.Table.from_pylist(regions, schema=pa.schema([schemas.REGIONS.field(n) for n in
                                                                    ("region_id", "image_id", "label", "attributes")])),
                   release / "regions" / "part-00000.parquet")
    return release


def test_release_scores_with_a_scene_graph_and_with_the_release_fallback(tmp_path):
    graphs = tmp_path / "graphs.jsonl"  # build-verified-qa's tuple input: img1 has its graph, img2 has none
    graphs.write_text(json.dumps({"image_id": "img1", "caption": "", "scene_graph": {
        "dog": {"attributes": ["brown", "big"], "relations_to": {"grass": ["on"]}},
        "grass": {"attributes": [], "relations_to": {}}}}) + "\n")
    answers = {"q1": "The dog is brown and large.", "q2": "The dog is brown and large.", "q3": "Is it?"}
    embedder, release = LiteralEmbedder(), _release_with_regions(tmp_path)
    with FixtureLLM(generations=_replies(broken="Is it?")) as server:
        cache = CallCache(tmp_path / "calls.jsonl")
        result = prove_scores(release, ROWS, answers, _client(server), cache=cache,
                              embedder=embedder, graphs=load_graphs(graphs))
        sent = len(server.requests)
        again = score_prove(release, ROWS, answers, _client(server), cache=cache,
                            embedder=LiteralEmbedder(), graphs=load_graphs(graphs))
        assert len(server.requests) == sent == 6  # the six distinct texts, once; the rerun is all cached
    # q1: the graph {dog, grass, dog brown, dog big, dog on grass} is IMAGE: the hand-computed example
    assert result.scores["q1"] == pytest.approx((0.8, 0.98)) and result.graph_source["q1"] == "scene_graph"
    # q2: no graph for img2; g(C) = region "dog" (big) + the tuples of img2's verified answers (q2, q3, q4),
    # which hold dog small: dog large -> 0.6 * 0.8 + 0.8 * 0.6 = 0.96 against dog big; dog brown -> 1
    assert result.scores["q2"] == pytest.approx((0.8, 0.98)) and result.graph_source["q2"] == "release"
    assert result.errors == {"q3": "response extraction_broken: '{\"tuples\": [[\"dog\", \"brown\", \"on\", \"grass\"]]}'",
                             "q4": "no_prediction"}
    assert again == result.scores
    assert len(embedder.asked) == len(set(embedder.asked))  # every tuple text encoded once


def test_load_graphs_names_the_bad_line(tmp_path):
    path = tmp_path / "graphs.jsonl"
    path.write_text('{"image_id": "a", "scene_graph": {}}\n{"image_id": "b"}\n')
    with pytest.raises(ValueError, match=r"graphs.jsonl:2: not a scene-graph line"):
        load_graphs(path)
    shards = tmp_path / "graphs"
    shards.mkdir()
    pq.write_table(pa.table({"image_id": ["a"], "image_source": ["docci"], "graph": ['{"scene_graph": {"dog": {}}}']}),
                   shards / "part-00000.parquet")
    assert load_graphs(shards) == {"a": {"scene_graph": {"dog": {}}}}
