"""What question generation needs from the whole fact table, computed once per build.

- truthy facts: deprecated values dropped; where a subject+property has a preferred value,
  only preferred values count (Wikidata's ``wdt:`` semantics); duplicates removed.
- class names: the label that names a linked item in a question ("this skyscraper").
- routes: every property path of 1..max_hops hops from each linked item (a subject with hop-1
  facts), one row per (start item, route) with the asked fact (``fact_idx``); asked facts: one row
  per (final subject, property) reached by some route, with its value, how many distinct values
  it has and the property's rendering parameters (fact_choices.py renders their choices once). Inner hops only follow single-valued item facts (an inner hop with two values
  would make the sub-clause ambiguous); such edges are counted in ``stats``, not expanded.
  No property repeats within a route and no route comes back to an item it passed through.
- subject types: a fact is used only when its subject belongs to one of its property's subject
  types (P31/P279 facts, subject_types.py), so every hop of a route fits its template.
- route texts: the composed template of each route, split around the subject phrase.
- item kinds: an item's kinds are its P31 classes (vague ones such as "tourist attraction" left
  out), a class's its P279 superclasses; a literal item answer's distractors share one of its kinds.
- pools: per literal property and kind the distinct values (by normalized label) found on any
  subject (string values: one pool of kind ""), per fixed property its closed set (kind "": the
  closed set is one kind by design); distractors are drawn from them.

Everything here depends on the fact table and the bank only, never on which images a shard
holds, so sharding cannot change a question.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import polars as pl
import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.tasks.questions.bank import NAMING_PROPERTIES, SUBJECT, TemplateBank
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.hashing import stable_rank
from reasonvqa.tasks.questions.real_values import date_pool, number_pool
from reasonvqa.tasks.questions.subject_types import class_memberships, constraint_classes, typed_facts
from reasonvqa.tasks.questions.text import capitalize_expr, clean_phrase_expr, normalize_expr, normalize_text, resolve_articles_expr

VALUE_COLUMNS = ["value_kind", "value_qid", "value_label", "amount", "unit_qid", "unit_label", "time", "precision", "point_in_time"]
_KIND = {"item": "item", "quantity": "quantity", "time": "time", "string": "string", "monolingualtext": "string"}


@dataclass
class KnowledgeIndex:
    """Routes, class names, route texts and distractor pools for one bank, domain filter and hop limit."""

    bank_version: str
    domains: list[str] | None
    max_hops: int
    routes: pl.DataFrame  # start_qid, route_key, n_hop, text_idx, fact_idx; sorted by start_qid, route_key
    # one row per asked fact (row i = fact_idx i): choice_key, property_id, n_values, VALUE_COLUMNS, answer_qid,
    # category and the property's rendering parameters (_template_params)
    facts: pl.DataFrame
    class_names: pl.DataFrame  # qid, name_p31, name_p279
    # route_key, route, property_id, category, prefix, suffix (articles resolved), norm_prefix, norm_suffix,
    # template_ids, domains, rendering parameters of the asked property; row i belongs to routes with text_idx i
    route_texts: pl.DataFrame
    pool: pl.DataFrame  # pool_idx, property_id, kind, norm, display, weight (ordered by property, kind, then a stable hash)
    pool_lookup: pl.DataFrame  # property_id, kind, norm, pool_idx (fixed aliases included)
    pool_spans: pl.DataFrame  # property_id, kind, pool_offset, pool_size
    item_kinds: pl.DataFrame  # qid, kind: the classes an item is an instance of (a class: its superclasses)
    stats: dict = field(default_factory=dict)
    # real values of each number / date property, for distractors (real_values.py)
    number_pool: pl.DataFrame | None = None  # property_id, unit_key, amount
    date_pool: pl.DataFrame | None = None  # property_id, time, precision
    _route_spans: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    choice_cache: dict = field(default_factory=dict, repr=False, compare=False)  # fact_choices.py: a Future per seed and config

    def routes_for(self, qids: list[str]) -> pl.DataFrame:
        """The route rows of the given start items (an unknown item has none)."""
        spans = np.array([self._route_spans.get(q, (0, 0)) for q in qids], dtype=np.int64).reshape(-1, 2)
        lengths = spans[:, 1] - spans[:, 0]
        if not lengths.sum():
            return self.routes.clear()
        # the rows a..b of each item in turn: one arange, shifted per item by its start
        shift = np.repeat(spans[:, 0] - (np.cumsum(lengths) - lengths), lengths)
        return self.routes[np.arange(lengths.sum()) + shift]


def build_index(facts: pa.Table | pl.DataFrame, bank: TemplateBank, config: QuestionConfig) -> KnowledgeIndex:
    """Prepare the fact table for question generation (see the module docstring)."""
    templates = bank.select(config.domains)
    clean = truthy_facts(facts, set(templates) | set(NAMING_PROPERTIES))
    # every shard waits for the index: the parts off the routes' path (class names, pools) are built
    # on a second thread meanwhile (polars releases the GIL while it computes)
    with ThreadPoolExecutor(max_workers=1) as side:
        class_names = side.submit(_class_names, clean, bank.naming_avoid)
        clean = clean.with_columns(n_values=pl.col("value_key").n_unique().over("subject_qid", "property_id"))
        question_facts = clean.filter(pl.col("property_id").is_in(list(templates)))
        # a fact whose subject is not of its property's subject types is neither asked nor passed through
        memberships = class_memberships(clean, constraint_classes(templates))
        fitting = typed_facts(question_facts, templates, memberships)
        type_stats = {"facts_subject_type_mismatch": question_facts.height - fitting.height}
        question_facts = fitting
        kinds = item_kinds(clean, bank.naming_avoid)
        pools = side.submit(_pools, question_facts, templates, kinds)
        numbers = side.submit(number_pool, question_facts, [p for p, t in templates.items() if t.category == "number"])
        dates = side.submit(date_pool, question_facts, [p for p, t in templates.items() if t.category == "date"])
        routes, route_stats = _routes(question_facts, templates, config.max_hops)
        route_texts = _route_texts(routes["route_key"].unique().sort().to_list(), templates, bank.domains)
        text_idx = route_texts.select("route_key", text_idx=pl.int_range(pl.len(), dtype=pl.UInt32))
        # text_idx follows route_key order, and a start item has one route per route_key, so this is the
        # (start_qid, route_key) order without comparing route strings
        routes = routes.join(text_idx, on="route_key").sort("start_qid", "text_idx")
        routes = routes.join(_dense_ranks(routes["fact_key"], "fact_idx"), on="fact_key", how="left", maintain_order="left")
        asked = _asked_facts(routes, templates)
        routes = routes.select("start_qid", "route_key", "n_hop", "text_idx", "fact_idx")
        spans = _spans(routes["start_qid"])
        pool, lookup, pool_spans = pools.result()
    return KnowledgeIndex(
        bank_version=bank.version,
        domains=config.domains,
        max_hops=config.max_hops,
        routes=routes,
        facts=asked,
        class_names=class_names.result(),
        route_texts=route_texts,
        pool=pool,
        pool_lookup=lookup,
        pool_spans=pool_spans,
        item_kinds=kinds,
        stats={"facts_in": len(facts), "truthy_facts": clean.height, **type_stats, **route_stats},
        number_pool=numbers.result(),
        date_pool=dates.result(),
        _route_spans=spans,
    )


def _dense_ranks(keys: pl.Series, name: str) -> pl.DataFrame:
    """Each distinct key with its 0-based dense rank (``rank("dense") - 1``) as UInt32 ``name``: the
    distinct keys are sorted instead of every row."""
    distinct = keys.unique().sort()
    return pl.DataFrame({keys.name: distinct, name: pl.int_range(len(distinct), dtype=pl.UInt32, eager=True)})


def _asked_facts(routes: pl.DataFrame, templates: dict) -> pl.DataFrame:
    """One row per asked fact, in ``fact_idx`` order (the routes to one fact share its value columns)."""
    asked = routes.unique("fact_idx", keep="any").sort("fact_idx").select("fact_key", "n_values", *VALUE_COLUMNS)
    # distractors are drawn per asked fact (final subject, property), not per image or route: a question
    # gets the same choices on every image and every route to the same fact, so no choice recurs
    # across the release more often than its answer
    choice_key = stable_rank(asked["fact_key"].to_list())
    asked = asked.select(
        pl.Series("choice_key", choice_key, dtype=pl.UInt64),
        pl.col("fact_key").str.split("\x1f").list.last().alias("property_id"),
        "n_values",
        *VALUE_COLUMNS,
        pl.when(pl.col("value_kind") == "item").then(pl.col("value_qid")).alias("answer_qid"),
    )
    categories = pl.DataFrame(
        {"property_id": list(templates), "category": [t.category for t in templates.values()]},
        schema={"property_id": pl.String, "category": pl.String},
    )
    params = _template_params(templates).join(categories, on="property_id")
    return asked.join(params, on="property_id", how="left", maintain_order="left")


def truthy_facts(facts: pa.Table | pl.DataFrame, properties: set[str]) -> pl.DataFrame:
    """Facts of ``properties`` with best-rank semantics, a value kind and a value key, deduplicated."""
    df = facts if isinstance(facts, pl.DataFrame) else cast(pl.DataFrame, pl.from_arrow(schemas.conform(facts, schemas.FACTS)))
    if "point_in_time" not in df.columns:
        df = df.with_columns(point_in_time=pl.lit(None, dtype=pl.String))
    df = df.filter(pl.col("property_id").is_in(sorted(properties)), pl.col("rank").fill_null("normal") != "deprecated")
    preferred = (pl.col("rank") == "preferred").any().over("subject_qid", "property_id")
    df = df.filter(~preferred | (pl.col("rank") == "preferred"))
    kind = pl.col("value_type").replace_strict(_KIND, default=None, return_dtype=pl.String)
    amount_key = pl.col("amount").cast(pl.String) + "|" + pl.col("unit_qid").fill_null("")
    time_key = pl.col("time") + "|" + pl.col("precision").cast(pl.String).fill_null("")
    key = (
        pl.when(kind == "item").then(pl.coalesce(pl.col("value_qid"), "label:" + pl.col("value_label")))
        .when(kind == "quantity").then(amount_key)
        .when(kind == "time").then(time_key)
        .when(kind == "string").then(pl.col("value_label"))
    )
    df = df.with_columns(value_kind=kind, value_key=key).filter(pl.col("value_key").is_not_null())
    cols = ["subject_qid", "property_id", "hop", "value_key", *VALUE_COLUMNS, "rank"]
    return (
        df.select(cols)
        .sort("subject_qid", "property_id", "value_key", "hop", "value_label", nulls_last=True)
        .unique(subset=["subject_qid", "property_id", "value_key"], keep="first", maintain_order=True)
    )


def _class_names(clean: pl.DataFrame, avoid: list[str]) -> pl.DataFrame:
    """Per subject the best P31 and the best P279 label: preferred rank first, then labels not in
    ``avoid`` (templates/naming.yaml), then the lowest item number."""
    naming = clean.filter(
        pl.col("property_id").is_in(list(NAMING_PROPERTIES)), pl.col("value_kind") == "item"
    ).with_columns(name=clean_phrase_expr(pl.col("value_label")))
    naming = naming.filter(pl.col("name").str.len_chars() > 0).with_columns(
        pref=(pl.col("rank") != "preferred").cast(pl.Int8),
        vague=normalize_expr(pl.col("name")).is_in(avoid).cast(pl.Int8),
        num=pl.col("value_qid").str.slice(1).cast(pl.Int64, strict=False),
    )
    best = naming.sort("subject_qid", "property_id", "pref", "vague", "num", "name").unique(
        subset=["subject_qid", "property_id"], keep="first", maintain_order=True
    )
    wide = best.pivot(on="property_id", index="subject_qid", values="name")
    for pid in NAMING_PROPERTIES:
        if pid not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.String).alias(pid))
    return wide.select(qid="subject_qid", name_p31="P31", name_p279="P279")


def _routes(facts: pl.DataFrame, templates: dict, max_hops: int) -> tuple[pl.DataFrame, dict]:
    finals = (
        facts.sort("subject_qid", "property_id", "value_key")
        .unique(subset=["subject_qid", "property_id"], keep="first", maintain_order=True)
        .select("subject_qid", "property_id", "n_values", *VALUE_COLUMNS)
    )
    # a time-varying value ("the head of government of ...") is never an inner hop: its sub-clause has no date
    sub_props = [pid for pid, t in templates.items() if t.sub is not None and not t.time_varying]
    item_edges = facts.filter(
        pl.col("property_id").is_in(sub_props), pl.col("value_kind") == "item", pl.col("value_qid").is_not_null()
    )
    edges = item_edges.filter(pl.col("n_values") == 1).select("subject_qid", "property_id", "value_qid")
    stats = {"inner_edges_multivalued": item_edges.filter(pl.col("n_values") > 1).height}
    starts = facts.filter(pl.col("hop") == 1).select(start_qid="subject_qid").unique()

    def finish(paths: pl.DataFrame, last: str, props: list[str], inner: list[str]) -> pl.DataFrame:
        out = paths.join(finals, left_on=last, right_on="subject_qid")
        for p in props:
            out = out.filter(pl.col("property_id") != pl.col(p))
        for q in ["start_qid", *inner]:
            out = out.filter(pl.col("value_qid").is_null() | (pl.col("value_qid") != pl.col(q)))
        key = pl.concat_str([*props, "property_id"], separator=">") if props else pl.col("property_id")
        return out.select(
            "start_qid", route_key=key, n_hop=pl.lit(len(props) + 1, pl.Int8), n_values="n_values",
            fact_key=pl.concat_str([pl.col(last), pl.col("property_id")], separator="\x1f"), **{c: c for c in VALUE_COLUMNS}
        )

    parts = [finish(starts, "start_qid", [], [])]
    paths = starts
    hop_props: list[str] = []
    inner: list[str] = []
    prev = "start_qid"
    for hop in range(1, max_hops):
        p, o = f"p{hop}", f"o{hop}"
        step = edges.rename({"subject_qid": prev, "property_id": p, "value_qid": o})
        paths = paths.join(step, on=prev)
        for q in ["start_qid", *inner]:
            paths = paths.filter(pl.col(o) != pl.col(q))
        for hp in hop_props:
            paths = paths.filter(pl.col(p) != pl.col(hp))
        hop_props.append(p)
        inner.append(o)
        prev = o
        parts.append(finish(paths, o, list(hop_props), list(inner)))
    return pl.concat(parts), stats


def _route_texts(route_keys: list[str], templates: dict, domain_order: list[str]) -> pl.DataFrame:
    """Compose each route's templates: the first hop's sub-clause innermost, the asked property's main template outside."""
    rows = []
    rank = {d: i for i, d in enumerate(domain_order)}
    for key in route_keys:
        route = key.split(">")
        text = SUBJECT
        for pid in route[:-1]:
            text = templates[pid].sub.replace(SUBJECT, text)
        last = templates[route[-1]]
        text = last.main.replace(SUBJECT, text)
        prefix, suffix = text.split(SUBJECT)
        domains = sorted({d for pid in route for d in templates[pid].domains}, key=rank.__getitem__)
        rows.append(
            {
                "route_key": key,
                "route": route,
                "property_id": route[-1],
                "category": last.category,
                "prefix": prefix,
                "suffix": suffix,
                "template_ids": [templates[p].sub_id for p in route[:-1]] + [last.main_id],
                "domains": domains,
            }
        )
    schema: dict[str, pl.DataType | type[pl.DataType]] = {
        "route_key": pl.String, "route": pl.List(pl.String), "property_id": pl.String, "category": pl.String,
        "prefix": pl.String, "suffix": pl.String, "template_ids": pl.List(pl.String), "domains": pl.List(pl.String),
    }
    # {a} is always followed by a word of its own template, so articles resolve before any subject is known
    texts = pl.DataFrame(rows, schema=schema).join(_template_params(templates), on="property_id", how="left", maintain_order="left")
    # a main template that starts with {subject} puts the first hop's sub-clause ("the country
    # where ...") at the start of the question: capitalize it here, the phrase when the prefix is empty
    texts = texts.with_columns(
        prefix=capitalize_expr(resolve_articles_expr(pl.col("prefix"))), suffix=resolve_articles_expr(pl.col("suffix"))
    )
    return texts.with_columns(norm_prefix=normalize_expr(pl.col("prefix")), norm_suffix=normalize_expr(pl.col("suffix")))


def _template_params(templates: dict) -> pl.DataFrame:
    """Per property the rendering parameters the answer categories read."""
    rows = [
        {
            "property_id": pid,
            "decimals": t.number.decimals,
            "spread": t.number.spread,
            "thousands": t.number.thousands,
            "window_years": t.date.window_years,
            "max_precision": t.date.max_precision,
            "time_varying": t.time_varying,
        }
        for pid, t in templates.items()
    ]
    schema = {
        "property_id": pl.String, "decimals": pl.Int64, "spread": pl.Float64, "thousands": pl.Boolean,
        "window_years": pl.Int64, "max_precision": pl.Int64, "time_varying": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def item_kinds(clean: pl.DataFrame, avoid: list[str]) -> pl.DataFrame:
    """qid, kind: the P31 classes of every item with one, else (a class) its P279 superclasses.

    Classes too vague to tell kinds apart (templates/naming.yaml: "tourist attraction" holds a
    mountain and a tower) are no kind; an item with only such classes has no kind."""
    typing = clean.filter(
        pl.col("property_id").is_in(["P31", "P279"]), pl.col("value_kind") == "item", pl.col("value_qid").is_not_null(),
        ~normalize_expr(pl.col("value_label").fill_null("")).is_in(avoid),
    )
    has_p31 = typing.filter(pl.col("property_id") == "P31")["subject_qid"].unique()
    kinds = typing.filter((pl.col("property_id") == "P31") | ~pl.col("subject_qid").is_in(has_p31.implode()))
    return kinds.select(qid="subject_qid", kind="value_qid").unique().sort("qid", "kind")


def _pools(
    facts: pl.DataFrame, templates: dict, kinds: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    literal = [pid for pid, t in templates.items() if t.category == "literal"]
    pooled = [pid for pid, t in templates.items() if t.category in ("literal", "fixed")]
    values = facts.filter(pl.col("property_id").is_in(pooled), pl.col("value_kind").is_in(["item", "string"]))
    values = values.with_columns(norm=normalize_expr(pl.col("value_label")), display=clean_phrase_expr(pl.col("value_label")))
    # a literal item value is a distractor only among values of one of its kinds (one row per kind);
    # a value of no known kind is never one. Strings and closed sets are one kind each ("").
    typed = values.filter(pl.col("value_kind") == "item", pl.col("property_id").is_in(literal))
    typed = typed.join(kinds, left_on="value_qid", right_on="qid")
    untyped = values.filter(~((pl.col("value_kind") == "item") & pl.col("property_id").is_in(literal)))
    values = pl.concat([typed, untyped.with_columns(kind=pl.lit(""))], how="diagonal")
    # weight: how many subjects have the value, so distractors are drawn as often as answers occur
    counted = (
        values.filter(pl.col("norm").str.len_chars() > 0)
        .group_by("property_id", "kind", "norm")
        .agg(display=pl.col("display").min(), weight=pl.col("subject_qid").n_unique().cast(pl.Int64))
    )
    literal_values = counted.filter(pl.col("property_id").is_in(literal))
    fixed_rows, alias_rows = [], []
    for pid, t in templates.items():
        for choice in t.choices:
            norm = normalize_text(choice.label)
            fixed_rows.append({"property_id": pid, "kind": "", "norm": norm, "display": choice.label})
            alias_rows += [{"property_id": pid, "alias": normalize_text(a), "norm": norm} for a in choice.aliases]
    fixed = pl.DataFrame(fixed_rows, schema={"property_id": pl.String, "kind": pl.String, "norm": pl.String, "display": pl.String})
    fixed = fixed.join(counted.select("property_id", "norm", "weight"), on=["property_id", "norm"], how="left")
    fixed = fixed.with_columns(weight=pl.col("weight").fill_null(0) + 1)  # every closed-set member can be drawn
    pool = pl.concat([literal_values, fixed])
    pool = pool.with_columns(
        pnum=pl.col("property_id").str.slice(1).cast(pl.Int64),
        rank=pl.Series(stable_rank((pool["property_id"] + "\x1f" + pool["norm"]).to_list()), dtype=pl.UInt64),
    ).sort("pnum", "kind", "rank", "norm")
    pool = pool.with_row_index("pool_idx").select(
        pl.col("pool_idx").cast(pl.Int64), "property_id", "kind", "norm", "display", "weight"
    )
    aliases = pl.DataFrame(alias_rows, schema={"property_id": pl.String, "alias": pl.String, "norm": pl.String})
    alias_lookup = aliases.join(pool, on=["property_id", "norm"]).select("property_id", "kind", norm="alias", pool_idx="pool_idx")
    lookup = pl.concat([pool.select("property_id", "kind", "norm", "pool_idx"), alias_lookup])
    spans = pool.group_by("property_id", "kind").agg(pool_offset=pl.col("pool_idx").min(), pool_size=pl.len().cast(pl.Int64))
    return pool, lookup, spans.sort("property_id", "kind")


def _spans(sorted_keys: pl.Series) -> dict[str, tuple[int, int]]:
    if sorted_keys.is_empty():
        return {}
    counts = sorted_keys.rle()
    ends = np.cumsum(counts.struct.field("len").to_numpy())
    starts = ends - counts.struct.field("len").to_numpy()
    return dict(zip(counts.struct.field("value").to_list(), zip(starts.tolist(), ends.tolist())))
