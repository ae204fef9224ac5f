"""Prompts: `a . b . c .` captions, passes under the token limit, char span -> token -> class."""

import numpy as np
import pytest

from reasonvqa.tasks.proposals.prompts import (
    assign_classes, build_prompt, class_token_mask, normalize_tag, split_passes, token_count, unique_tags,
)

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from reasonvqa.tasks.proposals.random_models import write_text_encoder

    return AutoTokenizer.from_pretrained(write_text_encoder(tmp_path_factory.mktemp("bert")))


def test_caption_and_spans():
    prompt = build_prompt(["traffic light", "minivan", "dog"])
    assert prompt.caption == "traffic light . minivan . dog ."
    assert [prompt.caption[a:b] for a, b in prompt.spans] == ["traffic light", "minivan", "dog"]


def test_tags_are_normalized_and_deduplicated():
    assert normalize_tag("  Traffic   Light. ") == "traffic light"
    assert unique_tags(["Dog", "dog", " ", "a.b", "Cat"]) == ["dog", "a b", "cat"]


def test_token_mask_covers_every_sub_word_of_a_class(tokenizer):
    prompt = build_prompt(["minivan", "dog"])
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(prompt.caption)["input_ids"])
    assert tokens == ["[CLS]", "mini", "##van", ".", "dog", ".", "[SEP]"]
    mask = class_token_mask(prompt, tokenizer, 16)
    assert mask.shape == (2, 16)
    assert np.flatnonzero(mask[0]).tolist() == [1, 2] and np.flatnonzero(mask[1]).tolist() == [4]


def test_class_is_the_argmax_over_class_spans_not_a_thresholded_sub_word(tokenizer):
    prompt = build_prompt(["minivan", "dog"])
    mask = class_token_mask(prompt, tokenizer, 8)
    probs = np.zeros((3, 8))
    probs[0, 2] = 0.9  # only "##van" fires: the class is still "minivan", not "##van"
    probs[1, [1, 4]] = [0.4, 0.6]  # dog wins
    probs[2, [3, 5]] = 0.95  # only the separators fire: both classes score 0, the first wins the tie
    probs[2, 4] = 0.1
    result = assign_classes(probs, mask)
    assert result.label.tolist() == [0, 1, 1]
    assert result.class_score.tolist() == [0.9, 0.6, 0.1]
    assert result.box_score.tolist() == [0.9, 0.6, 0.95]
    assert result.best.tolist() == [0.9, 0.6]  # each class's highest probability over the three boxes


def test_passes_stay_under_the_limit_and_keep_every_tag(tokenizer):
    tags = [f"{w} {x}" for w in ["red", "mini"] for x in ["car", "dog", "cat", "tree", "bus", "sign"]]
    prompts, too_long = split_passes(tags, tokenizer, max_tokens=16)
    assert too_long == []
    assert [c for p in prompts for c in p.classes] == tags
    assert all(token_count(tokenizer, p.caption) <= 16 for p in prompts)
    assert len(prompts) == 3  # 12 tags of 3 tokens each ("red car" + "."), 4 per 16-token pass
    assert token_count(tokenizer, prompts[0].caption) == 14


def test_a_tag_longer_than_the_limit_is_reported_not_truncated(tokenizer):
    prompts, too_long = split_passes(["dog", "traffic light window building sign"], tokenizer, max_tokens=6)
    assert [p.classes for p in prompts] == [("dog",)]
    assert too_long == ["traffic light window building sign"]


def test_default_limit_is_the_models_256(tokenizer):
    tags = [f"{a}{b}" for a in "abcdefghij" for b in "abcdefghijklmnopqrstuvwxyz"]  # 260 two-token tags
    prompts, _ = split_passes(tags, tokenizer)
    assert all(token_count(tokenizer, p.caption) <= 256 for p in prompts)
    assert sum(len(p.classes) for p in prompts) == 260 and len(prompts) == 4
