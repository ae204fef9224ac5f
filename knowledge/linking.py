"""Link image objects to Wikidata items.

- Objects with a WordNet 3.0 synset (Visual Genome): name -> 3.0 offset -> 3.1 offset
  (``wordnet``) -> the item whose P8814 holds that 3.1 id; optionally through the
  synset's hypernyms (breadth-first, depth recorded) when the synset itself has no item.
- Objects with a Commons category (GLDv2 landmarks): the category item's Commons
  sitelink + P301 (main topic), else an item holding the sitelink itself, else P373.

Every link records its method; every object that is not linked is rejected with a
reason. Look-ups are batched: one query per batch of distinct ids, never per object.
When several items share a synset or category, the lowest QID wins (deterministic;
on Wikidata the older item is usually the general concept).
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.lookups import items_for_commons_categories, items_for_wordnet31, labels_for, normalize_category
from reasonvqa.knowledge.wikidata import SparqlClient
from reasonvqa.knowledge.wordnet import SynsetInfo, WordNetMap, canonical_name, load_wordnet, parse_name
from reasonvqa import schemas
from reasonvqa.stage import Rejects, StageResult

STAGE = "linking"


@dataclass(frozen=True)
class SynsetLink:
    qid: str
    method: str  # "wordnet:p8814" or "wordnet:p8814:hypernym"
    depth: int  # 0 for a direct link
    via: str  # name of the synset whose P8814 matched


def resolve_synsets(
    infos: dict[str, SynsetInfo], wordnet: WordNetMap, client: SparqlClient, config: KnowledgeConfig
) -> dict[str, SynsetLink]:
    """Synset name -> link, for every synset that reaches an item (directly or through hypernyms)."""
    links: dict[str, SynsetLink] = {}
    direct = items_for_wordnet31([i.wn31_offset for i in infos.values() if i.wn31_offset], client, config.batch_size)
    for name, info in infos.items():
        if info.wn31_offset in direct:
            links[name] = SynsetLink(direct[info.wn31_offset], "wordnet:p8814", 0, info.name)
    if not config.hypernym_fallback:
        return links
    # frontier: start synset -> hypernym synsets at the current depth
    frontier = {n: _hypernyms(infos[n], wordnet) for n in infos if n not in links}
    for depth in range(1, config.max_hypernym_depth + 1):
        frontier = {n: hs for n, hs in frontier.items() if hs}
        if not frontier:
            break
        wanted = [h.wn31_offset for hs in frontier.values() for h in hs if h.wn31_offset]
        found = items_for_wordnet31(wanted, client, config.batch_size) if wanted else {}
        for name, hypernyms in sorted(frontier.items()):
            for hypernym in sorted(hypernyms, key=lambda h: h.wn30_offset):
                if hypernym.wn31_offset in found:
                    links[name] = SynsetLink(found[hypernym.wn31_offset], "wordnet:p8814:hypernym", depth, hypernym.name)
                    break
        frontier = {
            n: sorted({x for h in hs for x in _hypernyms(h, wordnet)}, key=lambda s: s.wn30_offset)
            for n, hs in frontier.items()
            if n not in links
        }
    return links


def _hypernyms(info: SynsetInfo, wordnet: WordNetMap) -> list[SynsetInfo]:
    found = (wordnet.by_offset(h) for h in info.hypernyms)
    return sorted((h for h in found if h is not None), key=lambda s: s.wn30_offset)


def link_objects(
    objects: pa.Table,
    client: SparqlClient,
    config: KnowledgeConfig,
    shard: int,
    *,
    wordnet: WordNetMap | None = None,
    source_file: str | None = None,
) -> StageResult:
    """Link one shard of objects (``schemas.OBJECTS``) to items; outputs ``entity_links``.

    Rejects name ``source_file`` (the objects file the shard came from; default
    ``objects/part-<shard>.parquet``) and the object id.

    rows_in = objects in the shard; each becomes one link or one reject
    (``no_synset``, ``malformed_synset``, ``synset_not_in_wordnet30``,
    ``no_wordnet31_counterpart``, ``no_wikidata_item``, ``malformed_commons_category``,
    ``commons_category_not_found``). An unreachable endpoint raises.
    """
    wordnet = wordnet or load_wordnet(config)
    rejects = Rejects(STAGE, shard)
    source = source_file or f"objects/part-{shard:05d}.parquet"
    requests_before, hits_before = client.requests, client.cache_hits
    rows = objects.select([c for c in ("object_id", "image_id", "synset", "commons_category") if c in objects.column_names]).to_pylist()

    synset_rows: list[tuple[dict, SynsetInfo]] = []
    category_rows: list[tuple[dict, str]] = []
    for row in rows:
        where = f"{source}#{row.get('object_id')}"
        synset = row.get("synset")
        if synset:
            if parse_name(synset) is None:
                rejects.add("malformed_synset", where, row)
                continue
            info = wordnet.lookup(synset)
            if info is None:
                rejects.add("synset_not_in_wordnet30", where, row)
            elif info.wn31_offset is None:
                rejects.add("no_wordnet31_counterpart", where, row)
            else:
                synset_rows.append((row, info))
        elif row.get("commons_category"):
            name = normalize_category(row["commons_category"])
            if name is None:
                rejects.add("malformed_commons_category", where, row)
            else:
                category_rows.append((row, name))
        else:
            rejects.add("no_synset", where, row)

    synset_links = resolve_synsets({i.name: i for _, i in synset_rows}, wordnet, client, config)
    category_links = items_for_commons_categories([n for _, n in category_rows], client, config.batch_size)
    labels = labels_for(
        [link.qid for link in synset_links.values()] + [m.qid for m in category_links.values()],
        client,
        config.batch_size,
        config.label_language,
    )

    out: list[dict] = []
    for row, info in synset_rows:
        link = synset_links.get(info.name)
        if link is None:
            rejects.add("no_wikidata_item", f"{source}#{row['object_id']}", {**row, "wn31_offset": info.wn31_offset})
            continue
        out.append(
            {
                "object_id": row["object_id"],
                "image_id": row["image_id"],
                "qid": link.qid,
                "label": labels.get(link.qid),
                "method": link.method,
                "synset": info.name,
                "wn30_offset": info.wn30_offset,
                "wn31_offset": info.wn31_offset,
                "hypernym_depth": link.depth,
            }
        )
    for row, name in category_rows:
        match = category_links.get(name)
        if match is None:
            rejects.add("commons_category_not_found", f"{source}#{row['object_id']}", {**row, "category": name})
            continue
        out.append(
            {
                "object_id": row["object_id"],
                "image_id": row["image_id"],
                "qid": match.qid,
                "label": labels.get(match.qid),
                "method": match.method,
                "synset": None,
                "wn30_offset": None,
                "wn31_offset": None,
                "hypernym_depth": 0,
            }
        )
    out.sort(key=lambda r: (r["image_id"] or "", r["object_id"] or ""))
    return StageResult(
        outputs={"entity_links": schemas.from_rows(out, schemas.ENTITY_LINKS)},
        rejects=rejects,
        rows_in=len(rows),
        requests=client.requests - requests_before,
        extra={
            "cache_hits": client.cache_hits - hits_before,
            "methods": dict(sorted(Counter(r["method"] for r in out).items())),
            "wordnet_source": wordnet.source,
        },
    )


def default_store_dir(config: KnowledgeConfig) -> Path:
    """Where the offline CLI keeps its mirror store: ``<cache_dir>/knowledge_mirror`` or the user cache."""
    if config.cache_dir is not None:
        return Path(config.cache_dir) / "knowledge_mirror"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "reasonvqa" / "knowledge_mirror"


def _client_for(config: KnowledgeConfig, store_dir: Path | None, resources: contextlib.ExitStack) -> SparqlClient:
    if config.endpoint:
        from reasonvqa.knowledge.wikidata import WikidataClient, query_cache

        cache = resources.enter_context(query_cache(config.cache_dir, "link-synset-names"))
        return WikidataClient(config.endpoint, config, cache)
    from reasonvqa.knowledge.mirror import InProcessClient, build_store

    return InProcessClient.open(build_store(config.mirror_entities, store_dir or default_store_dir(config)))


def link_synset_names(
    names: list[str],
    config: KnowledgeConfig,
    *,
    client: SparqlClient | None = None,
    store_dir: Path | None = None,
) -> list[dict]:
    """Link WordNet 3.0 synset names (the ``reasonvqa link synsets`` CLI); one dict per name, in order.

    Keys: name, wn30_offset, wn31_offset, qid, label, method, hypernym_depth, via, reason
    (reason is null when linked). Without ``config.endpoint`` the embedded mirror is
    queried in-process (offline); with it, the endpoint (e.g. Wikidata) through the client.
    """
    wordnet = load_wordnet(config)
    infos: dict[str, SynsetInfo] = {}
    results: list[dict] = []
    for name in names:
        entry: dict[str, Any] = {"name": name, "wn30_offset": None, "wn31_offset": None, "qid": None, "label": None,
                                 "method": None, "hypernym_depth": None, "via": None, "reason": None}
        info = wordnet.lookup(name) if canonical_name(name) else None
        if parse_name(name) is None:
            entry["reason"] = "malformed_synset"
        elif info is None:
            entry["reason"] = "synset_not_in_wordnet30"
        else:
            entry["wn30_offset"], entry["wn31_offset"] = info.wn30_offset, info.wn31_offset
            if info.wn31_offset is None:
                entry["reason"] = "no_wordnet31_counterpart"
            else:
                infos[info.name] = info
        results.append(entry)
    if infos:
        with contextlib.ExitStack() as resources:
            client = client or _client_for(config, store_dir, resources)
            links = resolve_synsets(infos, wordnet, client, config)
            labels = labels_for([link.qid for link in links.values()], client, config.batch_size, config.label_language)
        for entry in results:
            info = wordnet.lookup(entry["name"]) if entry["wn31_offset"] else None
            if info is None:
                continue
            link = links.get(info.name)
            if link is None:
                entry["reason"] = "no_wikidata_item"
                continue
            entry.update(qid=link.qid, label=labels.get(link.qid), method=link.method,
                         hypernym_depth=link.depth, via=link.via)
    return results

