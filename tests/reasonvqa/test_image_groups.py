"""Image-group-disjoint splits: a landmark, a scene or an episode never has images in both train and test."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import schemas
from reasonvqa.image_groups import domains_of, group_names, image_groups, units_of
from reasonvqa.tasks.balance.config import BalanceConfig, SplitConfig
from reasonvqa.tasks.balance.pipeline import plan_release
from reasonvqa.tasks.balance.split import split_images
from reasonvqa.tasks.balance.summary import js_divergence_bits
from tests.tasks.balance.conftest import pool_of, question
from tests.tasks.balance.synthetic import synthetic_pool

CONFIG = SplitConfig(pool_min_share=0.1, train_ratio=0.7)


def images_rows(rows: list[dict]) -> pa.Table:
    return schemas.from_rows([{"visual_domain": None, **row} for row in rows], schemas.IMAGES)


def test_group_of_an_image_is_source_scoped_and_an_image_alone_without_one():
    images = images_rows([
        {"image_id": "gldv2:aa", "source": "gldv2", "group_id": "27"},
        {"image_id": "nuscenes:t1", "source": "nuscenes", "group_id": "scene-0001"},
        {"image_id": "droid:e1/0", "source": "droid", "group_id": "27"},  # same id, other source: another group
        {"image_id": "vg:1", "source": "vg", "group_id": None},
    ])
    groups = image_groups(images)
    assert groups.to_pydict() == {
        "image_id": ["gldv2:aa", "nuscenes:t1", "droid:e1/0", "vg:1"],
        "group": ["gldv2:group:27", "nuscenes:group:scene-0001", "droid:group:27", "vg:1"],
        "visual_domain": ["gldv2", "nuscenes", "droid", "vg"],  # no declared domain: the source
    }
    assert domains_of(pa.array(["gldv2:aa", "sa1b:9"]), image_groups(images_rows([
        {"image_id": "gldv2:aa", "source": "gldv2", "visual_domain": "landmarks"}]))).to_pylist() == ["landmarks", "sa1b"]
    # without a source column the image id's prefix names the source
    no_source = pa.table({"image_id": ["gldv2:aa", "vg:1"], "group_id": ["27", None]})
    assert image_groups(no_source)["group"].to_pylist() == ["gldv2:group:27", "vg:1"]
    # an image the images table lacks is a group of its own
    assert group_names(pa.array(["gldv2:aa", "sa1b:9"]), groups).to_pylist() == ["gldv2:group:27", "sa1b:9"]


def test_units_are_numbered_by_their_first_image():
    groups = pa.table({"image_id": ["a:1", "a:2", "a:3", "a:4"], "group": ["g2", "g1", "g2", "a:4"]})
    unit, names = units_of(pa.array(["a:1", "a:2", "a:3", "a:4", "a:5"]), groups)
    assert unit.tolist() == [0, 1, 0, 2, 3]
    assert names.to_pylist() == ["g2", "g1", "a:4", "a:5"]
    alone, ids = units_of(pa.array(["a:1", "a:2"]), None)
    assert alone.tolist() == [0, 1] and ids.to_pylist() == ["a:1", "a:2"]


def landmark_pool() -> tuple[pa.Table, pa.Table]:
    """Four landmarks of three images each (their facts repeat), and six images alone."""
    rows, images = [], []
    answers = {"L1": ["A", "B"], "L2": ["A", "C"], "L3": ["B", "C"], "L4": ["A", "B"]}
    for landmark, picks in answers.items():
        for k in range(3):
            image = f"gldv2:{landmark}{k}"
            images.append({"image_id": image, "source": "gldv2", "group_id": landmark})
            rows += [question(f"{image}-{a}", image, "P1", a) for a in picks]
    for k in range(6):
        image = f"vg:{k}"
        images.append({"image_id": image, "source": "vg", "group_id": None})
        rows += [question(f"{image}-{a}", image, "P1", a) for a in ("ABC"[k % 3], "ABC"[(k + 1) % 3])]
    return pool_of(rows), image_groups(images_rows(images))


def split_of(table: pa.Table) -> dict[str, str]:
    return dict(zip(table["image_id"].to_pylist(), table["split"].to_pylist()))


def test_no_group_in_both_splits_and_the_groups_are_reported():
    pool, groups = landmark_pool()
    result = split_images(pool, CONFIG, seed=3, groups=groups)
    split = split_of(result.images)
    for landmark in ("L1", "L2", "L3", "L4"):
        assert len({split[f"gldv2:{landmark}{k}"] for k in range(3)}) == 1, landmark
    train = set(result.train["image_id"].to_pylist())
    test = set(result.test["image_id"].to_pylist())
    assert not train & test and train | test == set(split)
    report = result.report["groups"]
    assert (report["groups"], report["train"] + report["test"]) == (10, 10)
    assert report["with_several_images"] == {"groups": 4, "images": 12, "train": report["with_several_images"]["train"],
                                             "test": 4 - report["with_several_images"]["train"]}
    assert [g["group"] for g in report["largest"]] == sorted(g["group"] for g in report["largest"])
    assert {g["images"] for g in report["largest"]} == {3}
    # the images table counts images, each under its group's category and split
    assert result.report["train"]["images"] + result.report["test"]["images"] == 18


def test_groups_of_one_image_split_like_images():
    pool, _ = landmark_pool()
    ids = pc.unique(pool["image_id"])
    alone = pa.table({"image_id": ids, "group": ids})
    grouped, plain = split_images(pool, CONFIG, seed=5, groups=alone), split_images(pool, CONFIG, seed=5)
    assert grouped.images.equals(plain.images)
    assert grouped.train.equals(plain.train) and grouped.test.equals(plain.test)
    assert "groups" not in plain.report


def answer_divergence(pool: pa.Table, train_rows: np.ndarray, test_rows: np.ndarray) -> float:
    answers = pool["answer"].to_numpy(zero_copy_only=False)
    count = lambda rows: dict(zip(*np.unique(answers[rows], return_counts=True)))  # noqa: E731
    return js_divergence_bits(count(train_rows), count(test_rows))


def test_grouped_split_keeps_the_answer_stratification_of_the_image_split():
    """On a synthetic pool whose images come in groups of 1-8, the group split keeps every group on one side,
    its train share near 70 %, and train/test answers about as close as the image split's."""
    pool = synthetic_pool(60_000, 6_000, 40, seed=1)
    ids = pc.unique(pool["image_id"])
    size = np.random.default_rng(0).integers(1, 9, len(ids))
    group_of = np.repeat(np.arange(len(ids)), size)[:len(ids)]  # consecutive images share a group
    groups = pa.table({"image_id": ids, "group": pa.array([f"g{g}" for g in group_of])})
    balance = BalanceConfig(hop_shares=None)
    split = SplitConfig(drop_test_pairs_seen_in_train=False)
    grouped = plan_release(pool, balance, split, seed=0, groups=groups).split
    plain = plan_release(pool, balance, split, seed=0).split

    name = dict(zip(ids.to_pylist(), group_of.tolist()))
    train_groups = {name[i] for i in pool["image_id"].take(pa.array(grouped.train_rows)).to_pylist()}
    test_groups = {name[i] for i in pool["image_id"].take(pa.array(grouped.test_rows)).to_pylist()}
    assert not train_groups & test_groups
    assert grouped.report["groups"]["groups"] == len(train_groups | test_groups) == len(set(group_of.tolist()))
    assert abs(grouped.report["train_share_questions"] - 0.7) < 0.02
    by_group = answer_divergence(pool, grouped.train_rows, grouped.test_rows)
    by_image = answer_divergence(pool, plain.train_rows, plain.test_rows)
    assert by_group < by_image + 0.01, (by_group, by_image)  # both about 0.09 bits: many rare answers
