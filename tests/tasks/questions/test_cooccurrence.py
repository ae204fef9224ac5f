"""Label co-occurrence over literal corpora: the counts C = X^T X, the rule-of-succession estimate (the largest over
the image's labels, rare labels abstaining when asked), the image's floor and the ranking; then against a pure-Python
reference on a random corpus."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import polars as pl

from reasonvqa.tasks.questions.cooccurrence import Cooccurrence, least_images

IMAGES = {"vg:1": ["car", "road", "tree"], "vg:2": ["car", "road"], "vg:3": ["car", "tree"], "vg:4": ["cup", "table"],
          "vg:5": ["cup", "table", "plate"], "vg:6": ["car", "road", "sky"]}
# a repeated pair counts once
PAIRS = pl.DataFrame({"image_id": [i for i, ls in IMAGES.items() for _ in ls] + ["vg:1"],
                      "label": [x for ls in IMAGES.values() for x in ls] + ["car"]})


def test_counts_are_images_per_label_pair():
    co = Cooccurrence(PAIRS)
    assert co.labels.to_list() == ["car", "cup", "plate", "road", "sky", "table", "tree"]
    # by hand: car with road in vg:1, vg:2, vg:6; car with tree in vg:1, vg:3; road with tree in vg:1 ...
    assert co.c.toarray().tolist() == [
        [4, 0, 0, 3, 1, 0, 2],
        [0, 2, 1, 0, 0, 2, 0],
        [0, 1, 1, 0, 0, 1, 0],
        [3, 0, 0, 3, 1, 0, 1],
        [1, 0, 0, 1, 1, 0, 0],
        [0, 2, 1, 0, 0, 2, 0],
        [2, 0, 0, 1, 0, 0, 2]]
    assert co.held.tolist() == [4, 2, 1, 3, 1, 2, 2] and co.widest == 3


def test_estimate_is_the_largest_over_the_image_labels():
    asked = pl.DataFrame({"image_id": ["vg:2", "vg:2", "vg:2", "vg:2", "vg:4", "vg:4", "vg:9", "vg:3"],
                          "label": ["tree", "sky", "cup", "giraffe", "plate", "car", "car", "sky"], "at": range(8)})
    found = Cooccurrence(PAIRS).estimates(asked)
    assert found.columns == ["image_id", "label", "at", "p", "given", "given_images", "with_label", "taking_part",
                             "abstaining"]
    assert found["at"].to_list() == list(range(8))
    assert found.select("taking_part", "abstaining").rows() == [(2, 0)] * 6 + [(None, None), (2, 0)]
    rows = found.select("p", "given", "given_images", "with_label").rows()
    assert rows == [
        (3 / 6, "car", 4, 2),  # tree on vg:2: car (2 + 1) / (4 + 2) beats road (1 + 1) / (3 + 2)
        (2 / 5, "road", 3, 1),  # sky: road 2/5 beats car 2/6
        (1 / 5, "road", 3, 0),  # never seen with car or road: road, the rarer, gives 1/5 (the floor)
        (1 / 5, "road", 3, 0),  # a label outside the corpus likewise
        (2 / 4, "cup", 2, 1),  # plate on vg:4: cup and table tie at 2/4, the first label is given
        (1 / 4, "cup", 2, 0),
        (None, None, None, None),  # vg:9 holds no label of the corpus: no estimate
        (2 / 6, "car", 4, 1)]  # sky on vg:3: car 2/6 beats tree 1/4


def test_labels_of_fewer_images_abstain():
    # held: car 4, road 3, cup, table, tree 2, plate, sky 1; with min_images 3 only car and road take part
    asked = pl.DataFrame({"image_id": ["vg:3", "vg:1", "vg:6", "vg:5", "vg:9"], "label": ["cup", "cup", "plate", "car", "car"]})
    found = Cooccurrence(PAIRS).estimates(asked, min_images=3)
    assert found.select("p", "given", "given_images", "with_label", "taking_part", "abstaining").rows() == [
        (1 / 6, "car", 4, 0, 1, 1),  # tree (1/4) would give the maximum; it abstains, car gives (0 + 1) / (4 + 2)
        (1 / 5, "road", 3, 0, 2, 1),  # vg:1 (car, road, tree): road 1/5 beats car 1/6, tree abstains
        (1 / 5, "road", 3, 0, 2, 1),  # vg:6 (car, road, sky): sky (1 image) abstains
        (None, None, None, None, 0, 3),  # vg:5 (cup, table, plate): every label abstains, no estimate
        (None, None, None, None, None, None)]
    assert Cooccurrence(PAIRS).taking_part(["vg:3", "vg:5", "vg:9", "vg:6"], 3).tolist() == [1, 0, 0, 2]


def test_least_images_is_the_first_count_whose_floor_is_below_the_threshold():
    # 1 / (m + 2) < t: 0.05 -> 19 (1/21; 1/20 is not below), 0.2 -> 4 (1/6), 0.21 -> 3 (1/5), 1/3 -> 2, 0.6 -> 0
    assert [least_images(t) for t in (0.05, 0.2, 0.21, 1 / 3, 0.6)] == [19, 4, 3, 2, 0]


def test_floors_and_the_ranking_above_them():
    co = Cooccurrence(PAIRS)
    assert co.floors(["vg:2", "vg:4", "vg:6", "vg:9"]).tolist() == [1 / 5, 1 / 4, 1 / 3, 1.0]
    ranked = co.ranked(["vg:3", "vg:2", "vg:9", "vg:4", "vg:1"], 5)
    assert ranked.rows() == [
        ("vg:3", "road", 4 / 6), ("vg:3", "sky", 2 / 6),  # road 4/6 (car), sky 2/6 (car); floor 1/4 (tree)
        ("vg:2", "tree", 3 / 6), ("vg:2", "sky", 2 / 5),  # cup, plate, table sit at the floor 1/5: not ranked
        ("vg:4", "plate", 2 / 4),
        ("vg:1", "sky", 2 / 5)]  # above vg:1's floor 1/4 (tree)
    assert co.ranked(["vg:3"], 1).rows() == [("vg:3", "road", 4 / 6)]
    assert co.ranked([], 5).height == 0 and co.ranked(["vg:3"], 0).height == 0


def test_ties_rank_by_label():
    # on vg:0 (cup, sink: 3 images each) bowl is seen with sink once, plate with cup once: both 2/5
    pairs = pl.DataFrame({"image_id": ["vg:0", "vg:0", "vg:1", "vg:1", "vg:2", "vg:2", "vg:3", "vg:3"],
                          "label": ["cup", "sink", "cup", "plate", "sink", "bowl", "cup", "sink"]})
    co = Cooccurrence(pairs)
    assert co.ranked(["vg:0"], 5).rows() == [("vg:0", "bowl", 2 / 5), ("vg:0", "plate", 2 / 5)]
    assert co.ranked(["vg:0"], 1).rows() == [("vg:0", "bowl", 2 / 5)]


def _random_corpus(seed: int, images: int, vocabulary: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    words = [f"w{n:02d}" for n in range(vocabulary)]
    weights = [1 / (n + 1) for n in range(vocabulary)]  # Zipf-like: common and rare labels, many ties
    return {f"vg:{i}": sorted(set(rng.choices(words, weights, k=rng.randint(1, 7)))) for i in range(images)}


def _reference(corpus: dict[str, list[str]]):
    """Estimates, floors and rankings by dict counting, exact fractions."""
    held: Counter = Counter()
    both: Counter = Counter()
    for labels in corpus.values():
        for s in labels:
            held[s] += 1
            for x in labels:
                if x != s:
                    both[s, x] += 1

    def estimate(image: str, x: str, least: int = 0) -> tuple[Fraction, str, int, int] | None:
        best = None
        for s in sorted(corpus[image]):
            if held[s] < least:  # abstains
                continue
            p = Fraction(both[s, x] + 1, held[s] + 2)
            if best is None or p > best[0]:
                best = (p, s, held[s], both[s, x])
        return best

    def ranked(image: str, cap: int) -> list[tuple[str, Fraction]]:
        floor = Fraction(1, min(held[s] for s in corpus[image]) + 2)
        scored = [(x, estimate(image, x)[0]) for x in sorted(held) if x not in corpus[image]]  # type: ignore[index]
        return sorted([(x, p) for x, p in scored if p > floor], key=lambda row: (-row[1], row[0]))[:cap]

    return held, estimate, ranked


def test_against_a_dict_counting_reference_on_a_random_corpus():
    corpus = _random_corpus(seed=7, images=300, vocabulary=40)
    pairs = pl.DataFrame({"image_id": [i for i, ls in corpus.items() for _ in ls],
                          "label": [x for ls in corpus.values() for x in ls]}).sample(fraction=1.0, shuffle=True, seed=3)
    co = Cooccurrence(pairs)
    held, estimate, ranked = _reference(corpus)
    assert dict(zip(co.labels.to_list(), co.held.tolist())) == dict(held)
    images = sorted(corpus)
    asked = pl.DataFrame([(i, x) for i in images for x in sorted(held) + ["unseen"] if x not in corpus[i]],
                         schema={"image_id": pl.String, "label": pl.String}, orient="row")
    for least in (0, 9, 30):
        found = co.estimates(asked, least)
        expected = [estimate(i, x, least) for i, x in asked.iter_rows()]
        assert found.select("p", "given", "given_images", "with_label").rows() == [
            (float(e[0]), *e[1:]) if e else (None, None, None, None) for e in expected]
        part = [sum(held[s] >= least for s in corpus[i]) for i, _ in asked.iter_rows()]
        assert found.select("taking_part", "abstaining").rows() == [
            (n, len(corpus[i]) - n) for n, (i, _) in zip(part, asked.iter_rows())]
        assert co.taking_part(images, least).tolist() == [sum(held[s] >= least for s in corpus[i]) for i in images]
    assert 0 < sum(e is None for e in expected) < len(expected)  # at 30 some images have no label taking part
    assert co.floors(images).tolist() == [float(Fraction(1, min(held[s] for s in corpus[i]) + 2)) for i in images]
    for cap in (1, 3, 8, 50):
        got = co.ranked(images, cap)
        assert got.rows() == [(i, x, float(p)) for i in images for x, p in ranked(i, cap)]


def test_the_same_pairs_in_any_order_give_the_same_answers():
    corpus = _random_corpus(seed=11, images=120, vocabulary=25)
    pairs = pl.DataFrame({"image_id": [i for i, ls in corpus.items() for _ in ls],
                          "label": [x for ls in corpus.values() for x in ls]})
    images = sorted(corpus)
    first, second = Cooccurrence(pairs), Cooccurrence(pairs.reverse())
    assert first.ranked(images, 10).equals(second.ranked(images, 10))
    asked = pl.DataFrame({"image_id": images, "label": ["w03"] * len(images)})
    assert first.estimates(asked).equals(second.estimates(asked))
