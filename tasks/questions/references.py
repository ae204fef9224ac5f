"""How a question refers to a linked object of an image: "this skyscraper" or, from a Visual Genome
relationship, "the vehicle parked next to the sidewalk".

Naming: a Visual Genome object is linked to a class item (car), so it is named by the class's
``subclass of`` (P279) label, then ``instance of`` (P31), then its own Visual Genome label; a
landmark is linked to an individual item, so it is named by its P31 label, then P279, then
``config.fallback_class_name``. The item's own label is never used: it would give the answer away
("Who designed this Eiffel Tower?"). Where a Visual Genome object's own word is used (no class
label, or the other object of a scene-graph phrase), it is the WordNet lemma of its synset
("books" with book.n.01 -> "book", the typo "pluged" with plug.n.01 -> "plug"), singular by
construction; the annotator's label only when the object has no synset.

Unambiguous references only (the rule, for "this <name>" and scene-graph phrases alike): within one
image, every linked object that fits the words must be linked to the same item, so the answer
cannot depend on which of them the reader picks. "this vehicle" is dropped where the image has a
car and a bus both named "vehicle"; "the vehicle parked on the road" may still single one out.
A scene-graph phrase uses a relationship whose subject is linked, whose object is a different item
(or unlinked), whose predicate is at most ``config.max_predicate_words`` plain words, and whose
(name, predicate, object label) triple passes the rule above; per linked item and image at most
``config.max_scene_graph_refs`` phrases are used, taken in relation-id order.

object_ids lists the objects the question is about first (sorted), then for a scene-graph phrase
the objects it is related to (sorted): "the car next to the bus" and "the bus next to the car"
have the same objects but not the same object_ids, so not the same question id.
"""

from __future__ import annotations

from typing import cast

import polars as pl
import pyarrow as pa

from reasonvqa.tasks.questions.bank import TemplateBank
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.text import clean_phrase_expr, normalize_predicate_expr

REF_SCHEMA = {
    "image_id": pl.String,
    "qid": pl.String,
    "phrase": pl.String,
    "object_ids": pl.List(pl.String),
    "has_scene_graph": pl.Boolean,
    "named_by": pl.String,  # P31 / P279: the property whose value names the object; null for a fallback name
}


def build_references(
    objects: pa.Table,
    relations: pa.Table,
    links: pa.Table,
    class_names: pl.DataFrame,
    bank: TemplateBank,
    config: QuestionConfig,
) -> tuple[pl.DataFrame, dict]:
    """All unambiguous references of the shard's linked objects, and counts of what was left out."""
    named = _named_links(objects, links, class_names, config)
    this_refs, n_ambiguous = _this_refs(named)
    stats = {"linked_items": named.height, "ambiguous_names": n_ambiguous}
    refs = [this_refs]
    if config.scene_graph_clauses and relations.num_rows:
        words = columns(objects, ["object_id", "synset", "label"]).select(
            "object_id", object_word=object_word_expr(pl.col("synset"), pl.col("label"))
        ).unique("object_id", keep="first", maintain_order=True)
        rels = columns(relations, RELATION_COLUMNS).join(words, on="object_id", how="left")
        sg_refs, sg_stats = _scene_graph_refs(rels, named, bank, config)
        refs.append(sg_refs)
        stats.update(sg_stats)
    return pl.concat(refs).select(list(REF_SCHEMA)), stats


RELATION_COLUMNS = ["relation_id", "image_id", "subject_id", "object_id", "predicate", "object_label"]


def synset_lemma_expr(synset: pl.Expr) -> pl.Expr:
    """The lemma a WordNet synset name starts with, as words: "teddy_bear.n.01" -> "teddy bear" (null if none)."""
    return synset.str.extract(r"^([^.]+)\.[nvasr]\.\d+$").str.replace_all("_", " ")


def object_word_expr(synset: pl.Expr, label: pl.Expr) -> pl.Expr:
    """How a question names a Visual Genome object by itself: its synset's lemma, else its label (lowercase)."""
    return clean_phrase_expr(pl.coalesce(synset_lemma_expr(synset), label.fill_null("").str.to_lowercase()))


def columns(table: pa.Table, names: list[str]) -> pl.DataFrame:
    """Only the named columns of an Arrow table as a polars frame (the others are never converted)."""
    return cast(pl.DataFrame, pl.from_arrow(table.select(names)))


def _named_links(objects: pa.Table, links: pa.Table, class_names: pl.DataFrame, config: QuestionConfig) -> pl.DataFrame:
    """Linked objects with the name of their item in their image and the property it came from."""
    links_df = columns(links, ["object_id", "image_id", "qid", "method", "synset"]).filter(pl.col("qid").is_not_null())
    # one name per (image, item), decided by its first object, so duplicates of an object agree
    items = links_df.sort("image_id", "qid", "object_id").group_by("image_id", "qid").agg(
        object_ids=pl.col("object_id").unique(maintain_order=True),
        first_object=pl.col("object_id").first(),
        method=pl.col("method").first(),
        synset=pl.col("synset").first(),
    )
    labels = columns(objects, ["object_id", "label"]).select(first_object="object_id", obj_label="label")
    labels = labels.unique("first_object", keep="first", maintain_order=True)
    items = items.join(labels, on="first_object", how="left").join(class_names, on="qid", how="left")
    is_class = pl.col("method").fill_null("").str.starts_with("wordnet") | pl.col("synset").is_not_null()
    own = object_word_expr(pl.col("synset"), pl.col("obj_label"))
    p279, p31 = clean_phrase_expr(pl.col("name_p279")), clean_phrase_expr(pl.col("name_p31"))
    named_by = (
        pl.when(is_class)
        .then(pl.when(p279.str.len_chars() > 0).then(pl.lit("P279")).when(p31.str.len_chars() > 0).then(pl.lit("P31")))
        .otherwise(pl.when(p31.str.len_chars() > 0).then(pl.lit("P31")).when(p279.str.len_chars() > 0).then(pl.lit("P279")))
    )
    items = items.with_columns(named_by=named_by)
    name = (
        pl.when(pl.col("named_by") == "P279").then(p279)
        .when(pl.col("named_by") == "P31").then(p31)
        .when(is_class & (own.str.len_chars() > 0)).then(own)
        .otherwise(pl.lit(config.fallback_class_name))
    )
    return items.with_columns(name=name).select("image_id", "qid", "object_ids", "name", "named_by")


def _this_refs(items: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    n_items = pl.col("qid").n_unique().over("image_id", pl.col("name").str.to_lowercase())
    items = items.with_columns(ambiguous=n_items > 1)
    refs = items.filter(~pl.col("ambiguous")).select(
        "image_id", "qid", phrase="this " + pl.col("name"), object_ids="object_ids", has_scene_graph=pl.lit(False),
        named_by="named_by",
    )
    return refs, int(items["ambiguous"].sum())


def _scene_graph_refs(
    relations: pl.DataFrame, named: pl.DataFrame, bank: TemplateBank, config: QuestionConfig
) -> tuple[pl.DataFrame, dict]:
    objects = named.explode("object_ids").rename({"object_ids": "object_id"})
    subj = objects.select(subject_id="object_id", qid="qid", name="name", named_by="named_by")
    other = objects.select(object_id="object_id", other_qid="qid")
    rel = relations
    rel = rel.join(subj, on="subject_id").join(other, on="object_id", how="left")
    pred = normalize_predicate_expr(pl.col("predicate"))
    max_words = config.max_predicate_words
    other = pl.coalesce("object_word", clean_phrase_expr(pl.col("object_label").fill_null("").str.to_lowercase()))
    rel = rel.with_columns(pred=pred, other_label=other)
    usable = (
        pl.col("pred").str.contains(r"^[a-z]+( [a-z]+){0," + str(max_words - 1) + r"}$")
        & ~pl.col("pred").is_in(["is", "are", "was", "were", "be", "and", "a", "an", "the"])
        & (pl.col("other_label").str.len_chars() > 0)
        & (pl.col("subject_id") != pl.col("object_id"))
        & (pl.col("other_qid").is_null() | (pl.col("other_qid") != pl.col("qid")))
    )
    n_rel = rel.height
    rel = rel.filter(usable)
    n_usable = rel.height
    mapping = pl.DataFrame(
        {"pred": list(bank.predicates), "mapped": list(bank.predicates.values())}, schema={"pred": pl.String, "mapped": pl.String}
    )
    # a verb in the third person, alone or before its preposition: "holds", "sits on", "hangs from"
    third_person = pl.col("pred").str.contains(r"^[a-z]{2,}[^s]s( |$)")
    rel = rel.join(mapping, on="pred", how="left").with_columns(
        pred_phrase=pl.coalesce("mapped", pl.when(third_person).then("that " + pl.col("pred")).otherwise("pred"))
    )
    rel = rel.with_columns(desc=pl.concat_str(["name", "pred_phrase", "other_label"], separator="|").str.to_lowercase())
    n_items = pl.col("qid").n_unique().over("image_id", "desc")
    rel = rel.with_columns(ambiguous=n_items > 1)
    n_ambiguous = rel.filter("ambiguous")["desc"].n_unique() if rel.height else 0
    rel = rel.filter(~pl.col("ambiguous"))
    per_desc = rel.group_by("image_id", "qid", "desc").agg(
        pl.col("name").first(),
        pl.col("named_by").first(),
        pl.col("pred_phrase").first(),
        pl.col("other_label").first(),
        first_relation=pl.col("relation_id").min(),
        subject_ids=pl.col("subject_id").unique().sort(),
        other_ids=pl.col("object_id").unique().sort(),
    )
    chosen = (
        per_desc.sort("image_id", "qid", "first_relation")
        .with_columns(rank=pl.int_range(pl.len()).over("image_id", "qid"))
        .filter(pl.col("rank") < config.max_scene_graph_refs)
    )
    refs = chosen.select(
        "image_id",
        "qid",
        phrase=pl.concat_str([pl.lit("the"), "name", "pred_phrase", pl.lit("the"), "other_label"], separator=" "),
        object_ids=pl.concat_list("subject_ids", "other_ids"),
        has_scene_graph=pl.lit(True),
        named_by="named_by",
    )
    stats = {
        "relations_with_linked_subject": n_rel,
        "relations_unusable": n_rel - n_usable,
        "ambiguous_scene_graph_phrases": n_ambiguous,
    }
    return refs, stats
