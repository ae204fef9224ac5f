"""Text-only checks of grounded questions, shared by the 50-image Visual Genome test and the sample-release test:
the masked-question vote and a bag-of-words logistic regression for ``is_hallucination`` (folds by image), and
the options of "A or B" questions."""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict

import numpy as np
from scipy import sparse

# closed-class words and the task words every form shares; every other word is masked
CLOSED = frozenset("""a an the this that these those there it its of to in on at by for with from into next or and than
    what which who how many much is are was were be do does more less object objects thing things image appears larger
    smaller color made left right above below front behind nearest camera one marked region""".split())


def masked(question: str) -> str:
    """The question with every word outside ``CLOSED`` masked ("How many _ are there in the image")."""
    return " ".join(w if w in CLOSED else "_" for w in re.findall(r"[a-z0-9]+", question.lower()))


def fold(image_id: str, folds: int = 5) -> int:
    """The fold of an image (a stable hash): all questions of one image are in one fold."""
    return int(hashlib.blake2b(image_id.encode(), digest_size=4).hexdigest(), 16) % folds


def vote_accuracy(rows: list[dict], folds: int = 5) -> float:
    """Text-only classifier: the majority ``is_hallucination`` of the masked question in the other folds (by image)."""
    correct = 0
    for f in range(folds):
        train = [r for r in rows if fold(r["image_id"], folds) != f]
        votes: dict[str, Counter] = defaultdict(Counter)
        for r in train:
            votes[masked(r["question"])][r["is_hallucination"]] += 1
        fallback = Counter(r["is_hallucination"] for r in train).most_common(1)[0][0]
        for r in (r for r in rows if fold(r["image_id"], folds) == f):
            seen = votes.get(masked(r["question"]))
            correct += (seen.most_common(1)[0][0] if seen else fallback) == r["is_hallucination"]
    return correct / len(rows)


def majority_rate(rows: list[dict]) -> float:
    """The accuracy of always guessing the more common ``is_hallucination`` value."""
    n = sum(r["is_hallucination"] for r in rows)
    return max(n, len(rows) - n) / len(rows)


_OPTION = {"to the left": "left", "to the right": "right"}


def first_option(question: str) -> tuple[str, str] | None:
    """(first option, second option) of an "A or B" question, in the answer's words; None for another question."""
    if m := re.fullmatch(r"Which appears larger in the image, (?:the )?(.+) or (?:the )?(.+)\?", question):
        return m[1], m[2]
    if m := re.fullmatch(r"Are there more (.+) or more (.+) in the image\?", question):
        return m[1], m[2]
    sides = "to the left|to the right|above|below|in front of|behind"
    if m := re.fullmatch(rf"(?:Is|Are) .+? ({sides}) or ({sides})(?: of)? .+\?", question):
        return _OPTION.get(m[1], m[1]), _OPTION.get(m[2], m[2])
    return None


def _features(question: str) -> list[str]:
    """Bag of words of a question: its lower-case words and word pairs (every word kept, labels included)."""
    words = re.findall(r"[a-z0-9']+", question.lower())
    return words + [f"{a} {b}" for a, b in zip(words, words[1:])]



def _presence(rows: list[dict], index: dict[str, int]) -> sparse.csr_matrix:
    """Rows x (features of ``index`` + an intercept column), sparse: 1 where the question has the feature."""
    columns = [sorted({index[w] for w in _features(r["question"]) if w in index}) + [len(index)] for r in rows]
    indptr = np.cumsum([0] + [len(c) for c in columns])
    flat = np.fromiter((i for c in columns for i in c), dtype=np.int64, count=int(indptr[-1]))
    return sparse.csr_matrix((np.ones(len(flat), dtype=np.float32), flat, indptr), shape=(len(rows), len(index) + 1))


def bag_of_words_accuracy(rows: list[dict], folds: int = 5, steps: int = 200, l2: float = 1e-3) -> float:
    """Text-only classifier on every word of the question: L2-regularized logistic regression over the presence
    of words and word pairs seen at least twice in training (full-batch gradient descent from zero, so
    deterministic), trained on the other folds (by image), predicting ``is_hallucination``."""
    correct = 0
    for f in range(folds):
        train = [r for r in rows if fold(r["image_id"], folds) != f]
        test = [r for r in rows if fold(r["image_id"], folds) == f]
        if not test:
            continue
        seen = Counter(w for r in train for w in set(_features(r["question"])))
        index = {w: i for i, w in enumerate(sorted(w for w, n in seen.items() if n >= 2))}
        x, y = _presence(train, index), np.array([r["is_hallucination"] for r in train], dtype=np.float32)
        weights = np.zeros(x.shape[1], dtype=np.float32)
        xt = x.T.tocsr()
        for _ in range(steps):
            p = 1 / (1 + np.exp(-(x @ weights)))
            weights -= 1.0 * (xt @ (p - y) / len(y) + l2 * weights)
        predicted = _presence(test, index) @ weights > 0
        correct += int(sum(bool(p) == r["is_hallucination"] for p, r in zip(predicted, test)))
    return correct / len(rows)
