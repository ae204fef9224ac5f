import numpy as np
import pytest

from reasonvqa.text_filters import (DEFAULT_TABOO_FILE, Embedder, load_taboo_words, near_duplicates,
                                            output_text, taboo_hits)


@pytest.mark.parametrize("value, text", [
    (None, ""), (True, "yes"), (False, "no"), ("The dog.", "The dog."), (["red", "small"], "red, small"),
    ({"b": 1, "a": [2]}, '{"a": [2], "b": 1}'), (3, "3"), (2.5, "2.5"),
])
def test_output_text(value, text):
    assert output_text(value) == text


def test_taboo_words_match_whole_words_and_phrases(tmp_path):
    path = tmp_path / "taboo.txt"
    path.write_text("# comment\ncaption\nscene graph  # a phrase\n\nNode\n")
    words = load_taboo_words(path)
    assert words == {"caption", "scene graph", "node"}
    assert taboo_hits("What does the Caption say?", words) == ["caption"]
    assert taboo_hits("Is the scene-graph right? And the node.", words) == ["node", "scene graph"]
    assert taboo_hits("The captions and nodes are plural.", words) == []
    assert "caption" in load_taboo_words(DEFAULT_TABOO_FILE)


def test_near_duplicates_keep_the_first_of_each_group():
    vectors = np.array([[1, 0], [0.99, 0.141], [0, 1], [0.1, 0.995], [-1, 0]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert near_duplicates(vectors, 0.95) == [None, 0, None, 2, None]
    assert near_duplicates(vectors[:0], 0.95) == []


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


def test_minilm_similarity_separates_matching_from_wrong_answers(embedder):
    sims = embedder.pair_similarity(
        ["The dog is lying on the grass.", "dog, grass, ball, collar", "The dog is lying on the grass."],
        ["The dog is lying on the grass.", "The dog is wearing a blue collar.", "Two boats are tied to a dock."])
    assert sims[0] == pytest.approx(1.0, abs=1e-5)
    assert sims[1] < 0.5 and sims[2] < 0.3
    vectors = embedder.encode(["a", "b"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert embedder.encode([]).shape == (0, 384)
