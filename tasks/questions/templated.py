"""Templated knowledge questions for one shard of images (the ``questions`` stage).

A candidate question is one (image, reference, route): a reference to a linked object ("this
church", "the vehicle parked next to the sidewalk", see references.py) and a property path from
the object's item through the fact table (see index.py). A route whose first hop is the property
that named the object ("What is this vehicle a subclass of?" when "vehicle" is its P279 label) is
no candidate: its answer is in the question or it has several; such routes are counted in the
shard's stats (routes_through_naming_property). rows_in counts candidates; each ends as one
question or one reject with a reason:

- multiple_answers: the asked subject+property has several truthy values, labeled or not
  (questions are single-answer, as in ReasonVQA; a distractor could otherwise be another true value)
- no_point_in_time: a time-varying property (population, head of government) whose value has no
  P585 point in time; with one, the question ends "... as of 2020?"
- no_english_label, empty_answer, value_type_mismatch, answer_outside_closed_set,
  answer_not_in_pool, date_too_coarse, date_without_precision, unparsable_date,
  number_out_of_range: the answer cannot be rendered (see pools.py, dates.py, numbers.py)
- answer_in_question: the answer's words appear in the question
- too_few_distractors: fewer than 3 distractors distinct from the answer and each other
  after normalization, or (numbers, dates) inside the range of the property's real values
- answer_kind_unknown: an item answer with no P31 (a class: no P279) in the facts, so no
  distractor can be shown to be of its kind (pools.py)
- duplicate_question: a second candidate with the same question id
- over_image_cap: beyond ``config.max_questions_per_image``

Ids: question_id = blake2b(image_id, object ids, route, template version) (hashing.py); the choice
order comes from that digest mixed with the build seed; the distractors from a hash of the asked
fact (final subject, property) mixed with the build seed, so a question has the same choices on
every image and every route that reaches the same fact.
Output rows are sorted by question_id. Nothing here depends on other images of the shard.
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.questions.bank import TemplateBank
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.fact_choices import fact_choices
from reasonvqa.tasks.questions.hashing import digest_keys, draw, mix_seed
from reasonvqa.tasks.questions.index import KnowledgeIndex, build_index
from reasonvqa.tasks.questions.references import build_references, columns
from reasonvqa.tasks.questions.text import capitalize_expr, normalize_expr

STAGE = "questions"
KIND = "template"  # the QUESTIONS kind of these rows
TASK_TYPE = "knowledge"  # beside VistaQA's six perception/reasoning task types
_PERMUTATIONS = np.array(list(itertools.permutations(range(4))), dtype=np.int64)


def generate_questions(
    images: pa.Table,
    objects: pa.Table,
    relations: pa.Table,
    links: pa.Table,
    facts: pa.Table | None,
    bank: TemplateBank,
    config: QuestionConfig,
    seed: int,
    shard: int,
    knowledge_snapshot: str,
    *,
    index: KnowledgeIndex | None = None,
) -> StageResult:
    """Generate the shard's questions; outputs {"questions": schemas.QUESTIONS}.

    ``facts`` is the whole fact table; pass ``index=build_index(facts, bank, config)`` to share
    that preparation between shards (``facts`` is then not read and may be None).
    """
    if index is None:
        if facts is None:
            raise ValueError("generate_questions needs the facts or a prepared index")
        index = build_index(facts, bank, config)
    _check_index(index, bank, config)
    rejects = Rejects(STAGE, shard)
    refs, stats = build_references(objects, relations, links, index.class_names, bank, config)
    refs = refs.with_columns(
        phrase_cap=capitalize_expr(pl.col("phrase")),
        norm_phrase=normalize_expr(pl.col("phrase")),
    )
    routes = index.routes_for(refs["qid"].unique().sort().to_list())
    keys = routes.select(
        "start_qid", "route_key", "n_hop", "text_idx", "fact_idx", first_hop=pl.col("route_key").str.extract(r"^(P\d+)"),
    )
    cand = refs.join(keys.filter(pl.col("n_hop") <= config.max_hops), left_on="qid", right_on="start_qid")
    # "What is this vehicle a subclass of?" when "vehicle" is its subclass-of label: never a question
    names_itself = pl.col("first_hop") == pl.col("named_by")
    stats["routes_through_naming_property"] = int(cand.select(names_itself.sum()).item() or 0)
    cand = cand.filter(~names_itself.fill_null(False))
    cand = _with_ids(cand, images, bank.version, seed)  # sorted by question_id from here on
    texts = index.route_texts.select("prefix", "suffix", "norm_prefix", "norm_suffix")
    choices = fact_choices(index, seed, bank, config)
    cand = pl.concat([cand, texts[cand["text_idx"]], choices[cand["fact_idx"]]], how="horizontal")
    question = (
        pl.when(pl.col("prefix") == "")
        .then(pl.concat_str(["phrase_cap", "suffix"]))
        .otherwise(pl.concat_str(["prefix", "phrase", "suffix"]))
    )
    question = pl.when(pl.col("as_of_suffix").is_not_null()).then(
        question.str.strip_suffix("?") + pl.col("as_of_suffix")
    ).otherwise(question)
    cand = _with_reasons(cand.with_columns(question=question), config)

    good = cand.filter(pl.col("reason").is_null())
    _add_rejects(rejects, cand.filter(pl.col("reason").is_not_null()), index)
    questions = _release_rows(good, index, knowledge_snapshot, bank.version)
    stats["candidates_by_hop"] = _counts(cand["n_hop"])
    stats["knowledge_index"] = dict(index.stats)  # whole-build numbers, the same in every shard
    return StageResult(outputs={"questions": questions}, rejects=rejects, rows_in=cand.height, extra={"questions": stats})


def _counts(series: pl.Series) -> dict[str, int]:
    counts = series.value_counts().sort(series.name)
    return {str(k): int(v) for k, v in zip(counts[series.name].to_list(), counts["count"].to_list())}


def _check_index(index: KnowledgeIndex, bank: TemplateBank, config: QuestionConfig) -> None:
    if index.bank_version != bank.version:
        raise ValueError(f"knowledge index built for template bank {index.bank_version}, not {bank.version}")
    if index.domains != config.domains or index.max_hops < config.max_hops:
        raise ValueError(
            f"knowledge index built for domains={index.domains} max_hops={index.max_hops}, "
            f"not domains={config.domains} max_hops={config.max_hops}"
        )


def _with_ids(cand: pl.DataFrame, images: pa.Table, version: str, seed: int) -> pl.DataFrame:
    sources = columns(images, ["image_id", "source"]).select("image_id", image_source="source")
    sources = sources.unique("image_id", keep="first", maintain_order=True)
    cand = cand.join(sources, on="image_id", how="left").with_columns(
        image_source=pl.coalesce("image_source", pl.col("image_id").str.extract(r"^([^:]+):"))
    )
    key = pl.concat_str(
        [pl.col("image_id"), pl.col("object_ids").list.join(","), pl.col("route_key"), pl.lit(version)], separator="\x1f"
    )
    ids, raw = digest_keys(cand.select(key.alias("key")).to_series())
    cand = cand.with_columns(question_id=ids, seed=pl.Series(mix_seed(raw, seed), dtype=pl.UInt64))
    return cand.sort("question_id", "phrase")


def _with_reasons(cand: pl.DataFrame, config: QuestionConfig) -> pl.DataFrame:
    """The first reason that rejects each candidate (null = keep).

    The asked fact decides the first reasons (fact_choices.py: several values, no point in time,
    an answer that cannot be rendered); then the answer's words in the question, too few distinct
    distractors (an exact-text clash among the four choices included: the safety net that keeps
    them distinct), and a repeated question id.
    """
    padded_question = pl.concat_str([pl.lit(""), "norm_prefix", "norm_phrase", "norm_suffix", pl.lit("")], separator=" ")
    in_question = padded_question.str.contains(pl.col("padded_answer"), literal=True)
    reason = (
        pl.when(pl.col("fact_reason").is_not_null()).then("fact_reason")
        .when(in_question).then(pl.lit("answer_in_question"))
        .when(pl.col("few")).then("few_reason")
        .when(pl.col("question_id") == pl.col("question_id").shift(1)).then(pl.lit("duplicate_question"))
    )
    cand = cand.with_columns(reason=reason)
    if config.max_questions_per_image is not None:
        # rows are in question_id order, so the running count keeps each image's lowest ids
        kept = pl.col("reason").is_null().cast(pl.Int64).cum_sum().over("image_id")
        over = pl.col("reason").is_null() & (kept > config.max_questions_per_image)
        cand = cand.with_columns(reason=pl.when(over).then(pl.lit("over_image_cap")).otherwise("reason"))
    return cand


def _release_rows(good: pl.DataFrame, index: KnowledgeIndex, snapshot: str, version: str) -> pa.Table:
    # choices[i][k] = (answer, d1, d2, d3)[perm[i][k]][i], one gather over the four columns stacked
    n = good.height
    perm = _PERMUTATIONS[(draw(good["seed"].to_numpy(), 41) % np.uint64(24)).astype(np.int64)]
    stacked = pl.concat([good["answer"], good["d1"], good["d2"], good["d3"]])
    choices = stacked.gather((perm * n + np.arange(n)[:, None]).ravel()).reshape((n, 4)).cast(pl.List(pl.String))
    lists = index.route_texts.select("route", "template_ids", "domains", "property_id", "category")[good["text_idx"]]
    lists = lists.with_columns(answer_qid=index.facts["answer_qid"].gather(good["fact_idx"]))
    if index.domains is not None:  # a domain-restricted build tags questions with the selected domains only
        wanted = pl.lit(pl.Series(sorted(index.domains), dtype=pl.String)).implode()
        lists = lists.with_columns(pl.col("domains").list.eval(pl.element().filter(pl.element().is_in(wanted))))
    out = pl.concat([good, lists], how="horizontal").select(
        "question_id",
        "image_id",
        "image_source",
        "object_ids",
        "question",
        "answer",
        "answer_qid",
        answer_category="category",
        choices=choices,
        n_hop="n_hop",
        route="route",
        property_id="property_id",
        domains="domains",
        has_scene_graph="has_scene_graph",
        template_ids="template_ids",
        template_version=pl.lit(version),
        knowledge_snapshot=pl.lit(snapshot),
        kind=pl.lit(KIND),
        task_type=pl.lit(TASK_TYPE),
        is_hallucination=pl.lit(False),
    )
    return schemas.conform(out.to_arrow(), schemas.QUESTIONS)


def _add_rejects(rejects: Rejects, bad: pl.DataFrame, index: KnowledgeIndex) -> None:
    """All rejected candidates at once (one row each: reason, where it came from, what it was)."""
    if bad.is_empty():
        return
    fact = index.facts.select("value_qid", "value_label", "n_values", "point_in_time")[bad["fact_idx"]]
    bad = pl.concat([bad, fact], how="horizontal")
    source = pl.concat_str(
        [
            pl.lit("image="), "image_id",
            pl.lit(" objects="), pl.col("object_ids").list.join(","),
            pl.lit(" route="), "route_key",
        ]
    )
    record = pl.struct(
        "question_id", "image_id", "object_ids", "route_key", "question", "answer", "value_qid", "value_label", "n_values",
        "point_in_time",
    ).struct.json_encode()
    rejects.add_table(bad.select(reason="reason", source=source, record=record).to_arrow())
