"""Synthetic question pools with Zipf-like answers, shared by the tests and the benchmarks (neither imports the other).

The rows are valid QUESTIONS records (choices = the answer and three distinct distractors,
one domain per property group) so a release written from them passes ``verify_release``.
Rows come grouped by image with hashed question ids, like the build's concatenated question
shards. Built column-wise with numpy and pyarrow compute, so a ReasonVQA-sized pool (4.2M
questions) takes seconds.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import schemas
from reasonvqa.tasks.balance import keys

DOMAINS = (
    "Places & Locations",
    "History & Events",
    "People & Society",
    "Nature & Animals",
    "Science & Technology",
    "Art & Culture",
)
CATEGORIES = ("literal", "fixed", "date", "number")
ANSWER_VOCABULARIES = 12


def synthetic_pool(
    n_questions: int,
    n_images: int,
    n_groups: int,
    *,
    seed: int = 0,
    answer_exponent: float = 1.1,
    max_answers: int = 5000,
    image_offset: int = 0,
) -> pa.Table:
    """A QUESTIONS table: group sizes and answers per group follow Zipf-like laws.

    ``image_offset`` numbers the images from there (pools of several chunks with distinct images).
    """
    rng = np.random.default_rng(seed)
    group_weight = 1.0 / np.arange(1, n_groups + 1) ** 0.8
    group = rng.choice(n_groups, size=n_questions, p=group_weight / group_weight.sum())
    # Answers per group between 2 and max_answers, log-uniform; answer rank ~ Zipf within the group.
    answers_in_group = np.exp(rng.uniform(np.log(2), np.log(max_answers), size=n_groups)).astype(np.int64)
    answer = np.empty(n_questions, dtype=np.int64)
    for g in range(n_groups):
        rows = np.flatnonzero(group == g)
        weights = 1.0 / np.arange(1, answers_in_group[g] + 1) ** answer_exponent
        answer[rows] = rng.choice(answers_in_group[g], size=len(rows), p=weights / weights.sum())
    image = rng.integers(0, n_images, size=n_questions)
    order = np.lexsort((group, image))  # questions of an image together, like generated shards
    group, answer, image = group[order], answer[order], image[order]

    prop = _fmt("P", pa.array(group + 10))
    # Groups share answer vocabularies (like country- or year-valued properties), so frequent
    # answers recur across groups and the split sees many pool answers.
    vocabulary = _fmt("V", pa.array(group % ANSWER_VOCABULARIES))
    answer_text = pc.binary_join_element_wise(vocabulary, pa.scalar("-a"), _str(answer), "")
    image_text = _fmt("vg:", pa.array(image + image_offset))
    n = n_questions
    choices = _list_of(
        [answer_text] + [pc.binary_join_element_wise(answer_text, pa.scalar(f" ({i})"), "") for i in (1, 2, 3)]
    )
    one = lambda values: pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), values)  # noqa: E731
    columns = {
        "question_id": _hex_ids(keys.keys_of(keys.salt(seed, "balance") ^ 0x5EED, np.arange(n))),
        "image_id": image_text,
        "image_source": _pick(("vg", "gldv2"), (image % 5 == 0).astype(np.int64)),
        "object_ids": one(pc.binary_join_element_wise(image_text, pa.scalar("/o1"), "")),
        "question": pc.binary_join_element_wise(
            pa.scalar("What is the "), prop, pa.scalar(" of the object shown in "), image_text, pa.scalar("?"), ""
        ),
        "answer": answer_text,
        "answer_qid": pa.nulls(n, pa.string()),
        "answer_category": _pick(CATEGORIES, group % len(CATEGORIES)),
        "choices": choices,
        "n_hop": pa.array((rng.integers(1, 4, size=n)).astype(np.int8)),
        "route": one(prop),
        "property_id": prop,
        "domains": one(_pick(DOMAINS, group % len(DOMAINS))),
        "has_scene_graph": pa.array(np.zeros(n, dtype=bool)),
        "template_ids": one(pc.binary_join_element_wise(prop, pa.scalar(".main"), "")),
        "template_version": _pick(("synthetic-1",), np.zeros(n, dtype=np.int64)),
        "knowledge_snapshot": _pick(("synthetic",), np.zeros(n, dtype=np.int64)),
    }
    return schemas.conform(pa.table(columns), schemas.QUESTIONS)


def _str(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _hex_ids(values: np.ndarray) -> pa.Array:
    """16-hex-digit ids (like the pipeline's hashed question ids, in no particular order)."""
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    nibbles = (values[:, None] >> (np.arange(15, -1, -1, dtype=np.uint64) * np.uint64(4))) & np.uint64(15)
    text = digits[nibbles.astype(np.int64)].reshape(-1).tobytes()
    offsets = np.arange(0, 16 * len(values) + 1, 16, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(text)])


def _pick(options: tuple[str, ...], index: np.ndarray) -> pa.Array:
    return pa.array(options, pa.string()).take(pa.array(index))


def _fmt(prefix: str, values: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(values, pa.string()), "")


def _list_of(parts: list[pa.Array]) -> pa.ListArray:
    """Row i = [parts[0][i], parts[1][i], ...]."""
    n, k = len(parts[0]), len(parts)
    flat = pa.concat_arrays([pc.cast(p, pa.string()) for p in parts])
    interleave = (np.arange(k)[None, :] * n + np.arange(n)[:, None]).ravel()
    return pa.ListArray.from_arrays(pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)), flat.take(pa.array(interleave)))
