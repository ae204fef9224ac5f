"""Image-disjoint, answer-stratified train/test split (ReasonVQA 3.3.2), vectorized with polars.

1. The answer pool: every answer holding at least ``pool_min_share`` of all questions.
2. An image's category: its two most frequent pool answers (ties: answer text), or its only
   one; an image with no pool answer goes to the category "<no pool answer>".
3. Merging: a two-answer category with a single image falls back to its first answer's
   category; any category still holding a single image joins the shared "<merged>" category.
4. Categories are laid out in label order, images inside a category by question count
   (descending) then a seeded random key. Image at global position p goes to train when
   ``floor(r*(p+1) + 0.5) - floor(r*p + 0.5) == 1`` (r = train_ratio): every category gets
   r of its images within one image, and the whole split exactly round(r * images). Sorting
   by question count first spreads heavy images over both splits, so the question ratio
   follows the image ratio closely.
All questions of an image go to its image's split. tasks/balance/reference.py implements the
same steps in plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from tasks.balance import keys
from tasks.balance.config import SplitConfig

NO_POOL_ANSWER = "<no pool answer>"
MERGED = "<merged>"
# Internal sort labels: "0" no pool answer, "1<a>" or "1<a>\x1f<b>" answer categories, "2" merged.
SEP = "\x1f"

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
    """Train and test questions (input schema, sorted by question_id), per-image assignment, report."""

    train: pa.Table
    test: pa.Table
    images: pa.Table
    report: dict


def check_split_input(questions: pa.Table) -> None:
    """Raise a clear error on missing columns or questions without an image (they cannot be split)."""
    missing = [c for c in ("question_id", "image_id", "answer") if c not in questions.column_names]
    if missing:
        raise ValueError(f"questions lack required column(s) {missing}; they have {questions.column_names}")
    no_image = questions.filter(questions["image_id"].is_null())
    if no_image.num_rows:
        ids = no_image["question_id"].to_pylist()[:5]
        raise ValueError(f"{no_image.num_rows} question(s) have no image_id and cannot be split, e.g. {ids}")


def split_images(questions: pa.Table, config: SplitConfig, seed: int) -> SplitResult:
    """Assign every image (with all its questions) to train or test; deterministic for ``seed``."""
    check_split_input(questions)
    frame = pl.from_arrow(questions.select(["question_id", "image_id", "answer"])).with_row_index("row")
    n = frame.height
    answer_counts = frame.filter(pl.col("answer").is_not_null()).group_by("answer").agg(count=pl.len())
    pool = answer_counts.filter(pl.col("count").cast(pl.Float64) >= config.pool_min_share * n).sort(
        ["count", "answer"], descending=[True, False]
    )
    per_image_answer = (
        frame.join(pool.select("answer"), on="answer", how="semi").group_by(["image_id", "answer"]).agg(count=pl.len())
    )
    top2 = per_image_answer.group_by("image_id").agg(
        top=pl.col("answer").sort_by(["count", "answer"], descending=[True, False]).head(2)
    )
    images = (
        frame.group_by("image_id")
        .agg(questions=pl.len())
        .join(top2, on="image_id", how="left")
        .sort("image_id")
        .with_row_index("image_rank")
    )
    images = images.with_columns(
        key=pl.Series(keys.keys_of(keys.salt(seed, "split"), images["image_rank"].to_numpy()), dtype=pl.UInt64),
        first=pl.when(pl.col("top").list.len() > 0).then(pl.lit("1") + pl.col("top").list.get(0, null_on_oob=True)),
    )
    two = pl.col("top").list.len() == 2
    images = images.with_columns(
        initial=pl.when(two)
        .then(pl.col("first") + SEP + pl.col("top").list.get(1, null_on_oob=True))
        .otherwise(pl.col("first").fill_null("0"))
    )
    images = images.with_columns(
        level1=pl.when(pl.len().over("initial") == 1).then(pl.col("first").fill_null("0")).otherwise(pl.col("initial"))
    )
    images = images.with_columns(label=pl.when(pl.len().over("level1") == 1).then(pl.lit("2")).otherwise(pl.col("level1")))
    images = images.sort(["label", "questions", "key"], descending=[False, True, False])
    position = np.arange(images.height, dtype=np.float64)
    r = config.train_ratio
    is_train = (np.floor(r * (position + 1) + 0.5) - np.floor(r * position + 0.5)) == 1
    images = images.with_columns(is_train=pl.Series(is_train))

    assigned = frame.join(images.select("image_id", "is_train"), on="image_id", how="left")
    train_rows = _rows_by_question_id(assigned.filter(pl.col("is_train")))
    test_rows = _rows_by_question_id(assigned.filter(~pl.col("is_train")))
    report = split_report(
        config,
        seed,
        questions=n,
        pool=list(zip(pool["answer"].to_list(), pool["count"].to_list())),
        images=list(
            zip(
                images["initial"].to_list(),
                images["level1"].to_list(),
                images["label"].to_list(),
                images["questions"].to_list(),
                images["is_train"].to_list(),
            )
        ),
    )
    table = images.select(
        "image_id",
        category=pl.when(pl.col("label") == "0")
        .then(pl.lit(NO_POOL_ANSWER))
        .when(pl.col("label") == "2")
        .then(pl.lit(MERGED))
        .otherwise(pl.col("label").str.slice(1).str.replace_all(SEP, " + ", literal=True)),
        questions=pl.col("questions").cast(pl.Int64),
        split=pl.when(pl.col("is_train")).then(pl.lit("train")).otherwise(pl.lit("test")),
    ).sort("image_id")
    return SplitResult(
        train=questions.take(pa.array(train_rows)),
        test=questions.take(pa.array(test_rows)),
        images=table.to_arrow().cast(IMAGES),
        report=report,
    )


def _rows_by_question_id(frame: pl.DataFrame) -> np.ndarray:
    return frame.sort(["question_id", "row"], nulls_last=True)["row"].to_numpy()


def readable_category(label: str) -> str:
    """Display form of an internal category label."""
    if label == "0":
        return NO_POOL_ANSWER
    if label == "2":
        return MERGED
    return " + ".join(label[1:].split(SEP))


def split_report(
    config: SplitConfig,
    seed: int,
    *,
    questions: int,
    pool: list[tuple[str, int]],
    images: list[tuple[str, str, str, int, bool]],
) -> dict:
    """The split report from the pool answers and per-image (initial, level1, final label,
    questions, is_train) tuples; shared with the reference implementation."""
    categories: dict[str, list[int]] = {}
    for _, _, label, nq, is_train in images:
        entry = categories.setdefault(label, [0, 0, 0, 0])  # train images, test images, train q, test q
        entry[0 if is_train else 1] += 1
        entry[2 if is_train else 3] += nq
    train_images = sum(v[0] for v in categories.values())
    test_images = sum(v[1] for v in categories.values())
    train_q = sum(v[2] for v in categories.values())
    test_q = sum(v[3] for v in categories.values())
    no_pool = [img for img in images if img[0] == "0"]
    largest = sorted(categories.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))[:20]
    warnings = []
    if not pool and questions:
        warnings.append("no answer reaches pool_min_share: every image is in the '<no pool answer>' category")
    if no_pool:
        warnings.append(f"{len(no_pool)} image(s) have no pool answer; they form the '{NO_POOL_ANSWER}' category")
    if questions and (train_q == 0 or test_q == 0):
        warnings.append(f"a split is empty (train={train_q}, test={test_q} questions): too few images to split")
    return {
        "seed": seed,
        "config": config.model_dump(mode="json"),
        "questions": questions,
        "images": len(images),
        "pool_answers": [
            {"answer": a, "count": c, "share": round(c / questions, 6)} for a, c in pool
        ],
        "categories_initial": len({img[0] for img in images}),
        "categories_final": len(categories),
        "merged_pair_to_single_answer": sum(1 for img in images if img[0] != img[1]),
        "merged_into_shared": sum(1 for img in images if img[2] == "2"),
        "images_without_pool_answer": {
            "images": len(no_pool),
            "questions": sum(img[3] for img in no_pool),
            "handling": f"grouped into the category '{NO_POOL_ANSWER}' (or '{MERGED}' if alone) and split like any other",
        },
        "train": {"images": train_images, "questions": train_q},
        "test": {"images": test_images, "questions": test_q},
        "train_share_images": round(train_images / len(images), 6) if images else None,
        "train_share_questions": round(train_q / questions, 6) if questions else None,
        "largest_categories": [
            {"category": readable_category(k), "train_images": v[0], "test_images": v[1], "train_questions": v[2], "test_questions": v[3]}
            for k, v in largest
        ],
        "warnings": warnings,
    }
