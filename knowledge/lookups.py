"""Batched SPARQL look-ups shared by the linking and facts stages: one query per batch of ids."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote

from reasonvqa.knowledge import queries
from reasonvqa.knowledge.ids import batched, check_wordnet_id, id_sort_key, qid_from_iri
from reasonvqa.knowledge.wikidata import SparqlClient


@dataclass(frozen=True)
class ItemMatch:
    qid: str
    method: str


def items_for_wordnet31(wn31_ids: list[str], client: SparqlClient, batch_size: int) -> dict[str, str]:
    """WordNet 3.1 id -> item (the lowest QID where several items share a synset)."""
    found: dict[str, set[str]] = {}
    unique = sorted({check_wordnet_id(w) for w in wn31_ids})
    for batch in batched(unique, batch_size):
        for row in client.select(queries.items_by_wordnet31(batch)):
            qid = qid_from_iri(row.get("item", {}).get("value", ""))
            wn = row.get("wn", {}).get("value")
            if qid and wn in batch:
                found.setdefault(wn, set()).add(qid)
    return {wn: min(qids, key=id_sort_key) for wn, qids in found.items()}


def normalize_category(name: str | None) -> str | None:
    """A Commons category name as Wikidata stores it: percent-decoded, spaces, no prefix, first letter upper.

    Returns None for names that cannot be a category title (empty, control characters,
    characters MediaWiki forbids in titles).
    """
    if not isinstance(name, str):
        return None
    text = name.strip()
    if "%" in text:
        text = unquote(text)
    text = text.replace("_", " ")
    if text.lower().startswith("category:"):
        text = text[len("category:") :]
    text = unicodedata.normalize("NFC", " ".join(text.split()))
    if not text or any(unicodedata.category(c).startswith("C") for c in text) or any(c in text for c in "#<>[]|{}"):
        return None
    return text[0].upper() + text[1:]


def items_for_commons_categories(names: list[str], client: SparqlClient, batch_size: int) -> dict[str, ItemMatch]:
    """Commons category name -> item: the category item's sitelink + P301, else the sitelink holder, else P373."""
    unique = sorted(set(names))
    matches: dict[str, ItemMatch] = {}
    for batch in batched(unique, batch_size):
        candidates: dict[str, list[ItemMatch]] = {}
        for row in client.select(queries.items_by_commons_sitelink([f"Category:{n}" for n in batch])):
            title = row.get("title", {}).get("value", "")
            name = title[len("Category:") :] if title.startswith("Category:") else None
            main = qid_from_iri(row.get("main", {}).get("value", ""))
            holder = qid_from_iri(row.get("holder", {}).get("value", ""))
            if name is None:
                continue
            if main:
                candidates.setdefault(name, []).append(ItemMatch(main, "commons:sitelink-p301"))
            elif holder and "holderClass" not in row:
                candidates.setdefault(name, []).append(ItemMatch(holder, "commons:sitelink"))
        for name, found in candidates.items():
            matches[name] = min(found, key=lambda m: (m.method != "commons:sitelink-p301", id_sort_key(m.qid)))
    remaining = [n for n in unique if n not in matches]
    for batch in batched(remaining, batch_size):
        by_name: dict[str, set[str]] = {}
        for row in client.select(queries.items_by_commons_category(batch)):
            qid = qid_from_iri(row.get("item", {}).get("value", ""))
            name = row.get("name", {}).get("value")
            if qid and name in batch:
                by_name.setdefault(name, set()).add(qid)
        for name, qids in by_name.items():
            matches[name] = ItemMatch(min(qids, key=id_sort_key), "commons:p373")
    return matches


def labels_for(qids: list[str], client: SparqlClient, batch_size: int, language: str = "en") -> dict[str, str]:
    """Item -> label in ``language`` (items without one are absent)."""
    labels: dict[str, str] = {}
    unique = sorted(set(qids), key=id_sort_key)
    for batch in batched(unique, batch_size):
        for row in client.select(queries.labels(batch, language)):
            qid = qid_from_iri(row.get("item", {}).get("value", ""))
            if qid and qid in batch:
                # Several labels cannot exist per language; keep the smallest for determinism anyway.
                value = row["label"]["value"]
                labels[qid] = min(labels.get(qid, value), value)
    return labels
