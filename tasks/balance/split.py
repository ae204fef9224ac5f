"""Image-disjoint, answer-stratified train/test split (ReasonVQA 3.3.2), vectorized with numpy.

1. The answer pool: every answer holding at least ``pool_min_share`` of all questions.
2. An image's category: its two most frequent pool answers (ties: answer text), or its only
   one; an image with no pool answer goes to the category "<no pool answer>".
3. Merging: a two-answer category with a single image falls back to its first answer's
   category; any category still holding a single image joins the shared "<merged>" category.
4. Categories are laid out in order (no pool answer, answer categories by answer text,
   merged), images inside a category by question count (descending) then a seeded random
   key. The image at global position p goes to train when
   ``floor(r*(p+1) + 0.5) - floor(r*p + 0.5) == 1`` (r = train_ratio): every category gets
   r of its images within one image, and the whole split exactly round(r * images). Sorting
   by question count first spreads heavy images over both splits, so the question ratio
   follows the image ratio closely.
All questions of an image go to its image's split. With image groups (``image_groups``: a GLDv2 landmark,
a nuScenes scene, a DROID episode) the unit of steps 2-4 is the group instead of the image: a group's
category comes from all its questions and all its images go to one split, so no group is in both.
tests/tasks/balance/reference.py implements the same steps in plain Python (without groups: one image per unit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from reasonvqa import codes
from reasonvqa.image_groups import units_of
from reasonvqa.rows import row_dtype, row_numbers
from reasonvqa.tasks.balance import keys
from reasonvqa.tasks.balance.config import SplitConfig

NO_POOL_ANSWER = "<no pool answer>"
MERGED = "<merged>"
NONE_KIND, ANSWER_KIND, MERGED_KIND = 0, 1, 2

IMAGES = pa.schema(
    [
        ("image_id", pa.string()),
        ("category", pa.string()),  # "a + b", "a", "<no pool answer>" or "<merged>"
        ("questions", pa.int64()),
        ("split", pa.string()),
    ]
)


@dataclass
class SplitResult:
    """Train and test questions (input schema, sorted by question_id), per-image assignment, report.

    ``train_rows`` / ``test_rows``: their row numbers in the table given to the split;
    ``train`` and ``test`` are None when the split ran with ``materialize=False``.
    """

    train: pa.Table | None
    test: pa.Table | None
    images: pa.Table
    report: dict
    train_rows: np.ndarray | None = None
    test_rows: np.ndarray | None = None


def check_split_input(questions: pa.Table) -> None:
    """Raise a clear error on missing columns (the engine needs question_id, image_id, answer)."""
    codes.require_columns(questions, ("question_id", "image_id", "answer"))


def check_images(question_ids: list, image_ids: list) -> None:
    """Raise a clear error naming questions without an image: they cannot be split."""
    bad = [q for q, image in zip(question_ids, image_ids) if not image]
    if bad:
        raise ValueError(f"{len(bad)} question(s) have no image_id and cannot be split, e.g. {bad[:5]}")


def category_name(key: tuple) -> str:
    """Display name of a category key ``(kind, first answer, has second, second answer)``."""
    kind, first, has_second, second = key
    if kind == NONE_KIND:
        return NO_POOL_ANSWER
    if kind == MERGED_KIND:
        return MERGED
    return f"{first} + {second}" if has_second else first


def split_images(
    questions: pa.Table, config: SplitConfig, seed: int, *, rows: np.ndarray | None = None, materialize: bool = True,
    coded: codes.ColumnCodes | None = None, groups: pa.Table | None = None,
) -> SplitResult:
    """Assign every image (with all its questions) to train or test; deterministic for ``seed``.

    ``groups`` (``image_groups.GROUPS``: image_id, group) keeps the images of a group in one split; an image
    without a row is a group of its own.

    ``rows`` restricts the split to those rows of ``questions`` (e.g. ``BalanceResult.kept_rows``
    over the pool) without materializing them first; train and test are then taken from
    ``questions`` directly. ``materialize=False`` only returns the row numbers. ``coded``: the
    codes of ``questions``' columns when the caller shares them (``balance_questions``).
    """
    check_split_input(questions)
    coded = coded or codes.ColumnCodes(questions)
    # row numbers and codes keep the decision's width (rows.row_dtype: int32 below 2^31 rows)
    rows = row_numbers(questions.num_rows) if rows is None else np.asarray(rows, dtype=row_dtype(questions.num_rows))
    n = len(rows)
    image_all, image_values = coded.dense("image_id")
    image_code = image_all[rows]
    no_image = coded.missing("image_id")[rows]
    if no_image.any():
        check_images(questions["question_id"].take(pa.array(rows[no_image])).to_pylist(), [None] * int(no_image.sum()))
    present_images, image = codes.unique_ints(image_code, inverse=True, dtype=row_dtype(n))  # rank in image_id order
    del image_code
    n_images = len(present_images)
    present_ids = image_values.take(pa.array(present_images))
    unit_of_image, unit_names = units_of(present_ids, groups)  # without groups: unit i is image i
    n_units = len(unit_names)
    unit = unit_of_image[image] if n_units != n_images else image  # per question: its image's unit

    answer_all, answer_values = coded.dense("answer")
    answer = answer_all[rows]
    answer_count = np.bincount(answer[answer >= 0], minlength=len(answer_values))
    # answer-text order; an answer of none of ``rows`` is no pool answer, even when ``rows`` is empty
    pool_codes = np.flatnonzero((answer_count > 0) & (answer_count.astype(np.float64) >= config.pool_min_share * n))
    n_pool = len(pool_codes)
    pool_index = np.full(len(answer_values) + 1, -1, dtype=row_dtype(len(answer_values)))  # last slot: null answers
    pool_index[pool_codes] = np.arange(n_pool)
    question_pool = pool_index[answer]
    del answer

    first, second = _top_two(unit, question_pool, n_units, n_pool)
    k = n_pool + 1
    single = ANSWER_KIND * k * k + (first + 1) * k
    initial = np.where(first < 0, NONE_KIND, single + second + 1)
    level1 = np.where(_size_of(initial) == 1, np.where(first < 0, NONE_KIND, single), initial)
    label = np.where(_size_of(level1) == 1, MERGED_KIND * k * k, level1)

    unit_questions = np.bincount(unit, minlength=n_units)
    random_key = keys.keys_of(keys.salt(seed, "split"), np.arange(n_units))
    layout = np.lexsort((random_key, -unit_questions, label))
    position = np.arange(n_units, dtype=np.float64)
    r = config.train_ratio
    unit_train = np.empty(n_units, dtype=bool)
    unit_train[layout] = (np.floor(r * (position + 1) + 0.5) - np.floor(r * position + 0.5)) == 1

    by_question_id = coded.order_of("question_id", rows)
    goes_to_train = unit_train[unit[by_question_id]]
    train_rows = rows[by_question_id[goes_to_train]]
    test_rows = rows[by_question_id[~goes_to_train]]

    pool_answers = answer_values.take(pa.array(pool_codes)).to_pylist()
    decode = lambda code: _decode(int(code), k, pool_answers)  # noqa: E731
    # the report counts images (each with its unit's category and split) and, apart, the groups
    image_questions = np.bincount(image, minlength=n_images)
    is_train, image_label, no_pool = unit_train[unit_of_image], label[unit_of_image], (first < 0)[unit_of_image]
    categories = _category_totals(image_label, is_train, image_questions, decode)
    report = split_report(
        config,
        seed,
        questions=n,
        images=n_images,
        pool=sorted(zip(pool_answers, answer_count[pool_codes].tolist()), key=lambda ac: (-ac[1], ac[0])),
        categories=categories,
        categories_initial=len(np.unique(initial)),
        merged_pair_to_single=int((initial != level1).sum()),
        merged_into_shared=int((label == MERGED_KIND * k * k).sum()),
        no_pool_images=int(no_pool.sum()),
        no_pool_questions=int(image_questions[no_pool].sum()),
    )
    if groups is not None:
        report["groups"] = group_report(unit_names, unit_of_image, unit_train, unit_questions)
    return SplitResult(
        train=codes.take_rows(questions, train_rows) if materialize else None,
        test=codes.take_rows(questions, test_rows) if materialize else None,
        images=_images_table(present_ids, image_label, image_questions, is_train, decode),
        report=report,
        train_rows=train_rows,
        test_rows=test_rows,
    )


LARGEST_GROUPS = 20  # groups of several images listed in the report, the largest first


def group_report(names: pa.Array, unit_of_image: np.ndarray, unit_train: np.ndarray, unit_questions: np.ndarray) -> dict:
    """Groups per split (a group of one image counted too), and the groups of several images, the largest listed."""
    images = np.bincount(unit_of_image, minlength=len(names))
    several = images > 1
    order = np.lexsort((np.arange(len(names)), -unit_questions, -images))
    largest = [{"group": names[int(u)].as_py(), "images": int(images[u]), "questions": int(unit_questions[u]),
                "split": "train" if unit_train[u] else "test"} for u in order[several[order]][:LARGEST_GROUPS]]
    return {
        "unit": "group",
        "groups": int(len(names)),
        "train": int(unit_train.sum()),
        "test": int((~unit_train).sum()),
        "with_several_images": {"groups": int(several.sum()), "images": int(images[several].sum()),
                                "train": int((several & unit_train).sum()), "test": int((several & ~unit_train).sum())},
        "largest": largest,
    }


def _top_two(image: np.ndarray, question_pool: np.ndarray, n_images: int, n_pool: int) -> tuple[np.ndarray, np.ndarray]:
    """Per image: index of its most and second most frequent pool answer (-1 if none)."""
    first = np.full(n_images, -1, dtype=np.int64)
    second = np.full(n_images, -1, dtype=np.int64)
    has = question_pool >= 0
    if not has.any():
        return first, second
    pair = image[has].astype(np.int64)  # images x pool answers may pass int32
    pair *= n_pool
    pair += question_pool[has]
    pairs, counts = np.unique(pair, return_counts=True)
    del pair
    img, ans = pairs // n_pool, pairs % n_pool
    order = np.lexsort((ans, -counts, img))
    img, ans = img[order], ans[order]
    rank = np.arange(len(img)) - np.searchsorted(img, img, side="left")
    first[img[rank == 0]] = ans[rank == 0]
    second[img[rank == 1]] = ans[rank == 1]
    return first, second


def _size_of(label: np.ndarray) -> np.ndarray:
    """Per image: how many images share its label."""
    _, inverse, counts = np.unique(label, return_inverse=True, return_counts=True)
    return counts[inverse]


def _decode(code: int, k: int, pool_answers: list[str]) -> tuple:
    kind, rest = divmod(code, k * k)
    first, second = divmod(rest, k)
    if kind != ANSWER_KIND:
        return (kind, "", 0, "")
    return (kind, pool_answers[first - 1], int(second > 0), pool_answers[second - 1] if second else "")


def _category_totals(label: np.ndarray, is_train: np.ndarray, image_questions: np.ndarray, decode) -> dict:
    values, inverse = np.unique(label, return_inverse=True)
    m = len(values)
    train_images = np.bincount(inverse, weights=is_train, minlength=m).astype(np.int64)
    test_images = np.bincount(inverse, weights=~is_train, minlength=m).astype(np.int64)
    train_q = np.bincount(inverse, weights=image_questions * is_train, minlength=m).astype(np.int64)
    test_q = np.bincount(inverse, weights=image_questions * ~is_train, minlength=m).astype(np.int64)
    return {
        decode(v): [int(a), int(b), int(c), int(d)]
        for v, a, b, c, d in zip(values, train_images, test_images, train_q, test_q)
    }


def _images_table(image_ids: pa.Array, label: np.ndarray, image_questions: np.ndarray, is_train: np.ndarray, decode) -> pa.Table:
    values, inverse = np.unique(label, return_inverse=True)
    names = pa.array([category_name(decode(v)) for v in values], pa.string())
    return pa.table(
        {
            "image_id": image_ids,
            "category": names.take(pa.array(inverse)),
            "questions": pa.array(image_questions, pa.int64()),
            "split": pa.array(["test", "train"], pa.string()).take(pa.array(is_train.astype(np.int8))),
        }
    ).cast(IMAGES)


def split_report(
    config: SplitConfig,
    seed: int,
    *,
    questions: int,
    images: int,
    pool: list[tuple[str, int]],
    categories: dict[tuple, list[int]],
    categories_initial: int,
    merged_pair_to_single: int,
    merged_into_shared: int,
    no_pool_images: int,
    no_pool_questions: int,
) -> dict:
    """The split report (shared with the reference). ``categories`` maps category keys
    ``(kind, first, has_second, second)`` to [train images, test images, train questions, test questions]."""
    train_images = sum(v[0] for v in categories.values())
    test_images = sum(v[1] for v in categories.values())
    train_q = sum(v[2] for v in categories.values())
    test_q = sum(v[3] for v in categories.values())
    largest = sorted(categories.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))[:20]
    warnings = []
    if not pool and questions:
        warnings.append(f"no answer reaches pool_min_share: every image is in the '{NO_POOL_ANSWER}' category")
    if no_pool_images:
        warnings.append(f"{no_pool_images} image(s) have no pool answer; they form the '{NO_POOL_ANSWER}' category")
    if questions and (train_q == 0 or test_q == 0):
        warnings.append(f"a split is empty (train={train_q}, test={test_q} questions): too few images to split")
    if not questions:
        warnings.append("no question to split")
    return {
        "seed": seed,
        "config": config.model_dump(mode="json"),
        "questions": questions,
        "images": images,
        "pool_answers": [{"answer": a, "count": c, "share": round(c / questions, 6)} for a, c in pool],
        "categories_initial": categories_initial,
        "categories_final": len(categories),
        "merged_pair_to_single_answer": merged_pair_to_single,
        "merged_into_shared": merged_into_shared,
        "images_without_pool_answer": {
            "images": no_pool_images,
            "questions": no_pool_questions,
            "handling": f"grouped into the category '{NO_POOL_ANSWER}' (or '{MERGED}' if alone) and split like any other",
        },
        "train": {"images": train_images, "questions": train_q},
        "test": {"images": test_images, "questions": test_q},
        "train_share_images": round(train_images / images, 6) if images else None,
        "train_share_questions": round(train_q / questions, 6) if questions else None,
        "largest_categories": [
            {
                "category": category_name(key),
                "train_images": v[0],
                "test_images": v[1],
                "train_questions": v[2],
                "test_questions": v[3],
            }
            for key, v in largest
        ],
        "warnings": warnings,
    }
