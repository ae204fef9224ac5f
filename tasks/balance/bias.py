"""How much of a release a model answers without the image: the bias report (``stats/bias.json``).

Baselines, each next to chance (the mean of 1 / number of choices):

- choice-only, looking at one question's choices and nothing else, so no training data is involved
  and every released multiple-choice question (train and test) is scored:
  ``closest_to_mean`` and ``median`` (number and date questions, the choices read as numbers),
  ``most_frequent_choice`` (every question: the choice that occurs most often among the choices
  of the whole release, train and test);
- question-only: ``question_prior``, the most common train answer of the same question text,
  scored on test (a text never seen in train is answered at chance).

Ties are credited in expectation (1/k when the answer is one of k tied picks), so no baseline
gains from an arbitrary tie-break. Each accuracy comes with its number of questions and a 95 %
Wilson interval (``intervals``). Targets (issue 11): each choice-only baseline within
``CHOICE_ONLY_MARGIN`` of chance, the question prior at most ``QUESTION_PRIOR_MAX``. A target is
judged (``met`` / ``not_met``) only on at least ``MIN_JUDGED_N`` questions, else it is
``insufficient_n``: at n = 100 a baseline at chance (25 %) leaves the 10-point band by sampling
noise alone about 2 % of the time, at n = 1 half the time or more.

Each baseline is tallied as {credit value: questions} and its mean taken exactly (``Fraction``),
so the report does not depend on how the questions are split into parts or ordered: the
partitioned release path (``bias_report_parts``) writes the same bytes as the in-memory one.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterator, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from reasonvqa import codes
from reasonvqa.tasks.balance.text_only import TEXT_COLUMNS, TextOnly

CHOICE_ONLY_MARGIN = 0.10
QUESTION_PRIOR_MAX = 0.50
MIN_JUDGED_N = 100  # questions a target is judged on (see the module docstring)
QUESTION_BUCKETS = 32  # hash partitions of the question texts for the question prior on disk
BIAS_COLUMNS = ["question", "answer", "choices", "answer_category"]  # the choice-only baselines and the question prior
_Z95 = 1.959963984540054  # two-sided 95 % normal quantile
PAPER_AVG_QUESTION_WORDS = 9.77  # ReasonVQA supplementary Table 2 (full dataset; ReasonVQA-U: 9.62)
_NUMBER = r"^(-?[\d,]*\.?\d+)"
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


def bias_columns(names: list[str]) -> list[str]:
    """The columns the bias report reads of a table with ``names``: BIAS_COLUMNS and the text-only baselines'
    (kind, is_hallucination, image_id) that it has."""
    return BIAS_COLUMNS + [c for c in TEXT_COLUMNS if c in names and c not in BIAS_COLUMNS]


def choice_values(choices: pl.Expr, category: pl.Expr) -> pl.Expr:
    """Each choice as a float: numbers without separators and units, dates as fractional years (44 BC = -43)."""
    return pl.when(category == "date").then(choices.list.eval(_date(pl.element()))).otherwise(
        choices.list.eval(_number(pl.element())))


def _number(text: pl.Expr) -> pl.Expr:
    """A number choice as a float (separators and units dropped; null when unreadable)."""
    return text.str.extract(_NUMBER).str.replace_all(",", "").cast(pl.Float64, strict=False)


def _date(text: pl.Expr) -> pl.Expr:
    """A date choice as a fractional year (44 BC = -43; null when unreadable)."""
    year = text.str.extract(r"(\d+)( BC)?$").cast(pl.Float64, strict=False)
    bc = text.str.ends_with(" BC")
    month = text.str.extract(r"(" + "|".join(_MONTHS) + r")").replace_strict(
        {m: float(i) for i, m in enumerate(_MONTHS)}, default=0.0, return_dtype=pl.Float64
    )
    day = text.str.extract(r"^(\d+) (?:" + "|".join(_MONTHS) + ")").cast(pl.Float64, strict=False).fill_null(1.0)
    return pl.when(bc).then(1 - year).otherwise(year) + month / 12 + (day - 1) / 372


def _expected_hit(picked: pl.Expr, answer_index: pl.Expr) -> pl.Expr:
    """1/k when the answer's index is among the k picked indices, else 0."""
    return pl.when(picked.list.contains(answer_index)).then(1.0 / picked.list.len()).otherwise(0.0)


def _ties(scores: pl.Expr, best: str) -> pl.Expr:
    """Indices of the choices whose score equals the best (min or max) one."""
    target = pl.element().min() if best == "min" else pl.element().max()
    return scores.list.eval(pl.arg_where(pl.element() == target))


def bias_report(train: pa.Table, test: pa.Table) -> dict:
    """Accuracy of the choice-only baselines (train and test) and of the question-only prior (test),
    chance, the number of questions each is measured on with a 95 % interval, and the targets."""
    return bias_report_parts(lambda: iter([(train, test)]))


Parts = Callable[[], Iterator[tuple[pa.Table, pa.Table]]]  # -> (train rows, test rows) per part;
# a part may also be a row view with ``select(columns) -> pa.Table`` (the writer's ``TableRows``)


def bias_report_parts(parts: Parts, spill_dir: Path | None = None, buckets: int = QUESTION_BUCKETS) -> dict:
    """``bias_report`` over train and test given in parts (each with at least the BIAS_COLUMNS), read once.

    Every baseline is a count of credits per credit value, so parts and their order do not change the
    report. The question prior groups train answers by question text: with ``spill_dir`` the parts'
    questions go into ``buckets`` hash partitions on disk (equal texts share one), else they are kept here.
    The most-frequent-choice baseline keeps integer codes of each part's choices until every part is counted.
    """
    tally = _Tally()
    choices = _ChoiceCodes()
    prior = _QuestionBuckets(spill_dir, buckets)
    text = TextOnly()
    for train, test in parts():
        text.add(*(_text_columns(t) for t in (train, test)))
        tr, te, released = _multiple_choice(train, test)
        tally.add("chance", released.select(1.0 / pl.col("choices").list.len()))
        tally.test_questions += te.height
        values = _numeric_values(released)
        if values.height:
            tally.add("closest_to_mean", values.select(_expected_hit(_ties(_gap("mean"), "min"), pl.col("answer_index"))))
            tally.add("median", values.select(_expected_hit(_ties(_gap("median"), "min"), pl.col("answer_index"))))
            tally.add("numeric_chance", values.select(1.0 / pl.col("choices").list.len()))
        choices.add(released)
        tally.words(released.select(_words(pl.col("question")))["w"])
        prior.add(tr.select("question", "answer"), te.select("question", "answer", nc=pl.col("choices").list.len()))
    for credit in choices.most_frequent_choice() if tally.n("chance") else ():
        tally.add("most_frequent_choice", credit)
    for tr, te in prior.buckets():
        _question_prior(tr, te, tally)
    return tally.report() | {"text_only": text.report()}


def _text_columns(part) -> pa.Table:
    """The text-only baselines' columns of a part (a table, or a row view with ``select``) that it has."""
    names = part.column_names if isinstance(part, pa.Table) else part.table.column_names
    return part.select([c for c in TEXT_COLUMNS if c in names])


def _multiple_choice(train: pa.Table, test: pa.Table) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(train, test, released = train + test with ``row`` and ``answer_index``), multiple-choice rows only."""
    # free-form kinds (verified, grounded) have no choices: null or [] (templated rows without choices are
    # removed before balancing, balance.no_choices)
    multiple_choice = pl.col("choices").list.len().fill_null(0) > 0
    tr = cast(pl.DataFrame, pl.from_arrow(train.select(BIAS_COLUMNS))).filter(multiple_choice)
    te = cast(pl.DataFrame, pl.from_arrow(test.select(BIAS_COLUMNS))).filter(multiple_choice)
    return tr, te, _with_answer_index(pl.concat([tr, te]))


def _flat_rows(choices: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(first position, number of positions) of each row in ``choices.explode()``: a null list explodes to one
    null; a question needs at least one choice."""
    lengths = np.maximum(choices.list.len().fill_null(0).to_numpy().astype(np.int64), 1)
    return np.cumsum(lengths) - lengths, lengths


class _ChoiceCodes:
    """The choices of every part as integer codes (Arrow dictionary encoding per part, dictionaries unified at
    the end), so the release-wide count of each choice needs no second read of the parts: per part the flat
    choice codes (null: a null choice, never picked), the number of choices per question and the answer index.
    A question needs at least one choice (chance is 1 / choices)."""

    def __init__(self) -> None:
        self.parts: list[tuple[pa.DictionaryArray, np.ndarray, np.ndarray]] = []

    def add(self, released: pl.DataFrame) -> None:
        choices = released["choices"].to_arrow()
        lengths = pc.fill_null(pc.list_value_length(choices), 0).to_numpy().astype(np.int32)
        answer = released["answer_index"].to_numpy().astype(np.int32)
        self.parts.append((pc.dictionary_encode(pc.list_flatten(choices)), lengths, answer))

    def most_frequent_choice(self) -> Iterator[pl.DataFrame]:
        """Per part, the credit per question of picking the choice(s) that occur most often in all parts."""
        if not self.parts:
            return
        unified = pa.chunked_array([codes for codes, _, _ in self.parts]).unify_dictionaries()
        parts, self.parts = self.parts, []
        # at least one slot: choices that are all null leave an empty dictionary (their codes are -1, never read)
        counts = np.zeros(max(len(unified.chunk(0).dictionary), 1), np.int64)
        for chunk in unified.chunks:
            codes = _indices(chunk)
            counts += np.bincount(codes[codes >= 0], minlength=len(counts))
        for chunk, (_, lengths, answer) in zip(unified.chunks, parts):
            codes = _indices(chunk)
            yield _most_frequent_choice(np.where(codes >= 0, counts[np.maximum(codes, 0)], -1), lengths, answer)


def _indices(codes: pa.DictionaryArray) -> np.ndarray:
    """The dictionary codes as numpy, -1 for null."""
    return pc.fill_null(codes.indices, -1).to_numpy()


def _most_frequent_choice(n: np.ndarray, lengths: np.ndarray, answer: np.ndarray) -> pl.DataFrame:
    """Credit per question of picking its choice(s) with the largest release-wide count ``n`` (per flat choice
    position, -1 never picked; ``lengths`` positions per question) when ``answer`` is its answer's index."""
    if not len(lengths):
        return pl.DataFrame({"credit": []}, schema={"credit": pl.Float64})
    lengths = lengths.astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    top = (n == np.repeat(np.maximum.reduceat(n, starts), lengths)) & (n >= 0)
    ties = np.add.reduceat(top, starts)
    answer = answer.astype(np.int64)
    hit = (answer >= 0) & top[starts + np.maximum(answer, 0)]
    return pl.DataFrame({"credit": np.where(hit, 1.0 / np.maximum(ties, 1), 0.0)})


def _numeric_values(released: pl.DataFrame) -> pl.DataFrame:
    """Number and date questions with ``v``: their choices as floats (questions with an unreadable choice left out).

    ``choice_values`` on the flat choices, each kind's rule on its own rows only (same floats, no list.eval)."""
    numeric = released.filter(pl.col("answer_category").is_in(["number", "date"]))
    lengths = numeric["choices"].list.len().fill_null(0).to_numpy().astype(np.int64)
    flat = numeric.select("answer_category", "choices").explode("choices")
    flat = flat.filter(pl.Series(np.repeat(lengths > 0, np.maximum(lengths, 1))))  # an empty list's null
    values, valid = np.zeros(flat.height), np.zeros(flat.height, dtype=bool)
    date = (flat["answer_category"] == "date").to_numpy()
    for mask, rule in ((date, _date), (~date, _number)):
        parsed = flat.filter(pl.Series(mask)).select(rule(pl.col("choices")))
        values[mask] = parsed.to_series().fill_null(0.0).to_numpy()
        valid[mask] = parsed.to_series().is_not_null().to_numpy()
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    invalid = np.concatenate([[0], np.cumsum(~valid)])
    readable = invalid[offsets[1:]] == invalid[offsets[:-1]]
    v = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values, mask=~valid))
    return numeric.with_columns(v=pl.Series(v)).filter(pl.Series(readable))


def _words(question: pl.Expr) -> pl.Expr:
    """Words of each question: pieces between single spaces (as ``str.split(" ")`` counts, without the lists)."""
    return (question.str.count_matches(" ", literal=True) + 1).alias("w")


def _gap(centre: str) -> pl.Expr:
    """Per choice: its distance to the mean or the median of the question's choices."""
    middle = pl.element().mean() if centre == "mean" else pl.element().median()
    return pl.col("v").list.eval((pl.element() - middle).abs())


def _question_prior(tr: pl.DataFrame, te: pl.DataFrame, tally: "_Tally") -> None:
    """Credits of the test questions of one bucket: the most common train answer(s) of the same text (1/k when
    the answer is one of k tied ones; a text not in train, or a null one, is answered at chance).

    Only the texts whose 64-bit hash occurs on both sides can be shared (``_hash_shared``): the other test rows
    are answered at chance without encoding their texts, the rest go to ``_prior_credits`` (exact codes)."""
    if not te.height:
        return
    nc = te["nc"].to_numpy()
    credit, covered = 1.0 / nc, np.zeros(te.height)
    shared_test, shared_train = _hash_shared(tr["question"], te["question"])
    if shared_test.any():
        credit[shared_test], covered[shared_test] = _prior_credits(tr.filter(pl.Series(shared_train)),
                                                                   te.filter(pl.Series(shared_test)))
    tally.add("question_prior", pl.DataFrame({"credit": credit}))
    tally.add("question_prior_coverage", pl.DataFrame({"covered": covered}))


def _hash_shared(train: pl.Series, test: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(test rows whose text's hash occurs in ``train``, train rows whose text's hash occurs in ``test``): equal
    texts hash equal, so a test text outside the first mask is not in train and no train row outside the
    second shares a test text. Colliding texts stay in both masks; the exact codes tell them apart."""
    return codes.mutual_in(test.hash(seed=0).to_numpy(), train.hash(seed=0).to_numpy())


def _prior_credits(tr: pl.DataFrame, te: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(credit, covered as 0.0 / 1.0) per test row of the question prior, on exact integer codes (question and
    answer texts dictionary-encoded together for train and test; a null answer is a value of its own):
    (question, answer) pairs counted by a sort, looked up by binary search."""
    question = _codes(tr["question"], te["question"])
    answer = _codes(tr["answer"], te["answer"]) + 1  # a null answer (-1) is code 0
    answers = int(answer.max(initial=0)) + 1
    n = tr.height
    train = question[:n] >= 0
    pairs, count = np.unique(question[:n][train] * answers + answer[:n][train], return_counts=True)
    group = pairs // answers
    starts = np.flatnonzero(np.diff(group, prepend=-1))  # pairs sorted: one run per question
    top = count == np.repeat(np.maximum.reduceat(count, starts), np.diff(starts, append=len(count))) if len(count) else count > 0
    k = np.zeros(max(int(question.max(initial=-1)) + 1, 1), dtype=np.int64)
    if len(count):
        k[group[starts]] = np.add.reduceat(top, starts)
    test_question, test_pair = question[n:], question[n:] * answers + answer[n:]
    k_test = np.where(test_question >= 0, k[np.maximum(test_question, 0)], 0)
    at = np.minimum(np.searchsorted(pairs, test_pair), max(len(pairs) - 1, 0))
    hit = (pairs[at] == test_pair) & top[at] if len(pairs) else np.zeros(len(test_pair), dtype=bool)
    nc = te["nc"].to_numpy()
    credit = np.where(k_test == 0, 1.0 / nc, np.where(hit, 1.0 / np.maximum(k_test, 1), 0.0))
    return credit, (k_test > 0).astype(np.float64)


def _codes(train: pl.Series, test: pl.Series) -> np.ndarray:
    """Codes of the texts of ``train`` then ``test`` in one dictionary (equal texts, equal codes; -1: null)."""
    texts = pa.chunked_array([s.to_arrow().cast(pa.large_string()) for s in (train, test)], pa.large_string())
    encoded = pc.dictionary_encode(texts)
    return np.concatenate([pc.fill_null(c.indices, -1).to_numpy().astype(np.int64) for c in encoded.chunks])


class _QuestionBuckets:
    """Train (question, answer) and test (question, answer, nc) rows by hash of the question text: in
    memory (one bucket) without a folder, else in ``buckets`` Arrow IPC files per side under it."""

    def __init__(self, folder: Path | None, buckets: int):
        self.folder, self.count = folder, (buckets if folder is not None else 1)
        self.held: list[tuple[pl.DataFrame, pl.DataFrame]] = []
        self.writers: dict[tuple[str, int], pa.ipc.RecordBatchFileWriter] = {}
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def add(self, train: pl.DataFrame, test: pl.DataFrame) -> None:
        if self.folder is None:
            self.held.append((train, test))
            return
        for side, frame in (("train", train), ("test", test)):
            bucket = (frame["question"].hash(seed=0) % self.count).to_numpy()
            table = frame.to_arrow()
            for k in np.unique(bucket).tolist():
                if (side, k) not in self.writers:
                    self.writers[(side, k)] = pa.ipc.new_file(self.folder / f"{side}-{k:03d}.arrow", table.schema)
                self.writers[(side, k)].write_table(table.filter(pa.array(bucket == k)))

    def buckets(self) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
        if self.folder is None:
            if self.held:
                yield pl.concat([part[0] for part in self.held]), pl.concat([part[1] for part in self.held])
            return
        for writer in self.writers.values():
            writer.close()
        for k in range(self.count):
            yield self._read("train", k), self._read("test", k)

    def _read(self, side: str, k: int) -> pl.DataFrame:
        assert self.folder is not None, "only buckets spilled to a folder are read back"
        path = self.folder / f"{side}-{k:03d}.arrow"
        columns = {"question": pl.String, "answer": pl.String} | ({"nc": pl.UInt32} if side == "test" else {})
        if not path.exists():
            return pl.DataFrame(schema=columns)
        with pa.memory_map(str(path)) as source:
            frame = cast(pl.DataFrame, pl.from_arrow(pa.ipc.open_file(source).read_all()))
        path.unlink()
        return frame


class _Tally:
    """Credits per baseline as {credit value: questions}, and the question-length histogram."""

    def __init__(self) -> None:
        self.credits: dict[str, dict[float | None, int]] = {}  # None: a null credit (not scored)
        self.histogram: dict[int, int] = {}
        self.test_questions = 0

    def add(self, name: str, credits: pl.DataFrame) -> None:
        into = self.credits.setdefault(name, {})
        series = credits.to_series().cast(pl.Float64)
        for value, n in series.value_counts().iter_rows():
            into[value] = into.get(value, 0) + n

    def words(self, words: pl.Series) -> None:
        for w, n in words.drop_nulls().value_counts().iter_rows():
            self.histogram[w] = self.histogram.get(w, 0) + n

    def n(self, name: str) -> int:
        """The number of questions the baseline is scored on: its non-null credits (the mean's denominator)."""
        return sum(c for v, c in self.credits.get(name, {}).items() if v is not None)

    def mean(self, name: str) -> float | None:
        """The exact mean of the non-null credits, rounded once to a float (independent of order and parts)."""
        counted = {v: c for v, c in self.credits.get(name, {}).items() if v is not None}
        if not counted:
            return None
        return float(sum((Fraction(v) * c for v, c in counted.items()), Fraction(0)) / sum(counted.values()))

    def report(self) -> dict:
        chance = self.mean("chance")
        report: dict = {"test_questions": self.test_questions, "questions": self.n("chance"),
                        "chance": None if chance is None else round(chance, 4)}
        if chance is None:
            return report | {"baselines": {}, "intervals": {}, "targets": _targets({}, {}, report["chance"])}
        # a baseline whose credits are all null is not scored (no mean), like one that was never counted
        means = {name: mean for name in ("closest_to_mean", "median", "most_frequent_choice", "question_prior",
                                         "numeric_chance", "question_prior_coverage")
                 if (mean := self.mean(name)) is not None}
        baselines: dict = {}
        if "closest_to_mean" in means and "numeric_chance" in means:
            baselines["numeric_questions"] = self.n("closest_to_mean")
            baselines["numeric_chance"] = round(means["numeric_chance"], 4)
        scored = [name for name in ("closest_to_mean", "median", "most_frequent_choice", "question_prior") if name in means]
        if "question_prior" in means and "question_prior_coverage" in means:
            baselines["question_prior_coverage"] = round(means["question_prior_coverage"], 4)
        baselines |= {name: round(means[name], 4) for name in scored}
        report["baselines"] = dict(sorted(baselines.items()))
        report["intervals"] = {name: _interval(means[name], self.n(name), "test" if name == "question_prior" else "train+test")
                               for name in sorted(scored)}
        report["question_words"] = question_words(self.histogram)
        report["targets"] = _targets(baselines, report["intervals"], report["chance"])
        return report


def _with_answer_index(questions: pl.DataFrame) -> pl.DataFrame:
    """``answer_index``: the position of the answer among the choices (-1 when absent; the first if repeated)."""
    starts, lengths = _flat_rows(questions["choices"])
    if not len(starts):
        return questions.with_columns(answer_index=pl.lit(-1, pl.Int64))
    long = questions.select("answer", "choices").explode("choices")
    equal = long.select((pl.col("choices") == pl.col("answer")).fill_null(False)).to_series().to_numpy()
    position = np.arange(len(equal)) - np.repeat(starts, lengths)
    first = np.minimum.reduceat(np.where(equal, position, len(equal)), starts)
    return questions.with_columns(answer_index=pl.Series(np.where(first < len(equal), first, -1).astype(np.int64)))


def wilson_interval(accuracy: float, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion measured on ``n`` questions (n > 0)."""
    denominator = 1 + z * z / n
    centre = (accuracy + z * z / (2 * n)) / denominator
    half = z * math.sqrt(accuracy * (1 - accuracy) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _interval(accuracy: float, n: int, scored_on: str) -> dict:
    low, high = wilson_interval(accuracy, n) if n else (0.0, 1.0)
    return {"n": n, "ci95": [round(low, 4), round(high, 4)], "scored_on": scored_on}


def question_words(histogram: dict[int, int]) -> dict:
    """Question length in words (mean, quartiles, histogram) from {words: questions}, next to the paper's mean."""
    if not histogram:
        return {"paper_mean": PAPER_AVG_QUESTION_WORDS}
    lengths = sorted(histogram)
    n = sum(histogram.values())
    words = pl.Series("w", np.repeat(np.array(lengths, dtype=np.uint32), [histogram[w] for w in lengths]))
    return {
        "mean": round(sum(w * c for w, c in histogram.items()) / n, 2),
        "quartiles": [_nearest_quantile(words, q) for q in (0.25, 0.5, 0.75)],
        "histogram": {str(w): int(histogram[w]) for w in lengths},
        "paper_mean": PAPER_AVG_QUESTION_WORDS,
    }


def _nearest_quantile(values: pl.Series, q: float) -> float:
    value = values.quantile(q, "nearest")
    assert value is not None, "a non-empty series has every quantile"
    return float(value)


def _targets(baselines: dict, intervals: dict, chance: float | None) -> dict:
    """Per target ``met`` / ``not_met`` (judged on at least ``MIN_JUDGED_N`` questions) or
    ``insufficient_n``; ``met`` overall: True when every target is met, False when one is not,
    None when none fails but some could not be judged."""
    out = {"choice_only_margin": CHOICE_ONLY_MARGIN, "question_prior_max": QUESTION_PRIOR_MAX, "min_n": MIN_JUDGED_N}
    if chance is None:
        return out | {"checks": {}, "met": None}
    checks = {}
    for name in ("closest_to_mean", "median", "most_frequent_choice", "question_prior"):
        if name not in baselines:
            continue
        if name == "question_prior":
            ok = baselines[name] <= QUESTION_PRIOR_MAX
        else:
            reference = baselines.get("numeric_chance", chance) if name != "most_frequent_choice" else chance
            ok = abs(baselines[name] - reference) <= CHOICE_ONLY_MARGIN
        judged = intervals[name]["n"] >= MIN_JUDGED_N
        checks[name] = ("met" if ok else "not_met") if judged else "insufficient_n"
    met = False if "not_met" in checks.values() else (None if "insufficient_n" in checks.values() else True)
    return out | {"checks": checks, "met": met}
