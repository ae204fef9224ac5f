"""Multi-hop facts of linked items, as a stage output (``schemas.FACTS``).

Hop 1 asks for the best-rank statements of the given properties on the linked items;
every item value not seen before becomes a subject of hop 2, and so on up to
``config.max_hops``. One query per hop per batch of subjects, then the English labels
of every subject, item value and unit in separate batched queries.

What is a fact and what is a reject (reason):
- a best-rank statement value of one of the properties -> one fact row, with
  ``hop`` = distance of its subject from the linked item (1 = the linked item);
- ``unknown_value``: the statement says "some value" (no concrete value to ask about);
- ``unsupported_value_type``: coordinates, media files, URLs and other non-askable values;
- ``unit_without_label``: a quantity whose unit item has no English label;
- ``time_without_precision``: a time value whose precision is unknown;
- ``duplicate_value``: the same value stated twice for the same subject and property;
- ``malformed_qid``: an input id that is not ``Q<digits>`` (it never reaches a query).
rows_in = statement values returned by the queries + malformed input ids.
Item values are followed to the next hop whether or not they have a label. An item value without
an English label stays a fact with a null ``value_label``: no question names it, but it still
counts when questions check that a subject+property has a single answer (a capital with two
values, one unlabeled, is not single-valued). ``point_in_time`` is the statement's P585
qualifier (time-varying figures: "population as of 2020").
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Iterable, cast

import polars as pl

from reasonvqa.knowledge import queries
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.ids import batched, check_pid, id_sort_key, is_qid, qid_from_iri
from reasonvqa.knowledge.lookups import labels_for
from reasonvqa.knowledge.wikidata import Binding, SparqlClient
from reasonvqa import schemas
from reasonvqa.stage import Rejects, StageResult, read_table, write_parquet

STAGE = "facts"
WD = "http://www.wikidata.org/entity/"
WIKIBASE = "http://wikiba.se/ontology#"
XSD = "http://www.w3.org/2001/XMLSchema#"
UNIT_ONE = "Q199"
MAX_CLASS_DEPTH = 16  # levels of superclasses fetched above the classes the hops reach
NUMERIC = {XSD + t for t in ("decimal", "integer", "double", "float", "long", "int")}


def fetch_facts(
    qids: list[str],
    client: SparqlClient,
    config: KnowledgeConfig,
    properties: list[str],
    shard: int,
) -> StageResult:
    """Facts of ``properties`` for ``qids`` and the items they reach, up to ``config.max_hops``.

    ``properties`` come from the template bank (``TemplateBank.property_ids``); a malformed
    property id is a configuration error and raises ``MalformedId``.
    """
    pids = sorted({check_pid(p) for p in properties}, key=id_sort_key)
    if not pids:
        raise ValueError("fetch_facts needs at least one property id")
    rejects = Rejects(STAGE, shard)
    requests_before, hits_before = client.requests, client.cache_hits
    source = f"facts batch {shard} of distinct linked items"  # a batch of QIDs, not a linking shard
    malformed = 0
    subjects: set[str] = set()
    for qid in qids:
        if is_qid(qid):
            subjects.add(qid)
        else:
            malformed += 1
            rejects.add("malformed_qid", f"{source}#qid={qid!r}", {"qid": qid})

    candidates: list[dict] = []
    visited = set(subjects)
    frontier = sorted(subjects, key=id_sort_key)
    queried: set[str] = set()
    requests_by_hop: dict[str, int] = {}
    subjects_by_hop: dict[str, int] = {}
    for hop in range(1, config.max_hops + 1):
        if not frontier:
            break
        before = client.requests
        subjects_by_hop[str(hop)] = len(frontier)
        queried.update(frontier)
        found: list[dict] = []
        for batch in batched(frontier, config.batch_size):
            for row in client.select(queries.best_rank_statements(batch, pids)):
                found.append(_parse(row, hop))
        requests_by_hop[str(hop)] = client.requests - before
        candidates.extend(found)
        reached = {f["value_qid"] for f in found if f.get("value_type") == "item" and f.get("value_qid")}
        frontier = sorted(reached - visited, key=id_sort_key)
        visited |= reached

    before = client.requests
    class_facts, class_depth = _class_chains(candidates, queried, client, config, config.max_hops + 1)
    candidates.extend(class_facts)
    requests_by_hop["classes"] = client.requests - before

    before = client.requests
    wanted = {f["subject_qid"] for f in candidates} | {f["value_qid"] for f in candidates if f.get("value_qid")}
    wanted |= {f["unit_qid"] for f in candidates if f.get("unit_qid")}
    labels = labels_for(sorted(wanted), client, config.batch_size, config.label_language)
    requests_by_hop["labels"] = client.requests - before

    # the endpoint's row order is arbitrary: fix it so rejects (and which duplicate is kept) are deterministic
    candidates.sort(key=lambda f: (f["hop"], json.dumps(f, sort_keys=True)))
    facts = _accept(candidates, labels, rejects, source)
    facts.sort(key=_sort_key)
    return StageResult(
        outputs={"facts": schemas.from_rows(facts, schemas.FACTS)},
        rejects=rejects,
        rows_in=len(candidates) + malformed,
        requests=client.requests - requests_before,
        extra={
            "cache_hits": client.cache_hits - hits_before,
            "requests_by_hop": requests_by_hop,
            "subjects_by_hop": subjects_by_hop,
            "facts_by_hop": {str(h): n for h, n in sorted(Counter(f["hop"] for f in facts).items())},
            "class_chain_depth": class_depth,
        },
    )


def _class_chains(
    candidates: list[dict], queried: set[str], client: SparqlClient, config: KnowledgeConfig, hop: int
) -> tuple[list[dict], int]:
    """P279 (subclass of) facts of every class the facts reach through P31/P279, up their chains.

    Templates constrain their subject's type by class membership (``subject (P31|P279)/P279*
    class``); the hops above stop at ``max_hops``, so the chain above a class met at the last hop
    would be missing. These facts get ``hop`` = max_hops + 1: no question starts from them.
    ``queried``: the subjects the hops asked about. Returns the facts and how many chain levels were fetched.
    """
    found: list[dict] = []
    frontier = sorted(
        {f["value_qid"] for f in candidates if f.get("property_id") in ("P31", "P279") and f.get("value_qid")},
        key=id_sort_key,
    )
    # a class the hops already asked about has its P279 facts among the candidates
    seen = set(queried)
    frontier = [q for q in frontier if q not in seen]
    depth = 0
    while frontier and depth < MAX_CLASS_DEPTH:
        depth += 1
        level: list[dict] = []
        for batch in batched(frontier, config.batch_size):
            level.extend(_parse(row, hop) for row in client.select(queries.best_rank_statements(batch, ["P279"])))
        found.extend(level)
        seen |= set(frontier)
        parents = {f["value_qid"] for f in level if f.get("value_type") == "item" and f.get("value_qid")}
        frontier = sorted(parents - seen, key=id_sort_key)
    return found, depth


def _parse(row: Binding, hop: int) -> dict:
    """One binding of ``best_rank_statements`` -> a candidate fact (``reject`` set when unusable)."""
    fact: dict = {
        "subject_qid": qid_from_iri(row["s"]["value"]),
        "property_id": row["prop"]["value"].removeprefix(WD),
        "hop": hop,
        "rank": row["rank"]["value"].removeprefix(WIKIBASE).removesuffix("Rank").lower(),
    }
    if "pit" in row and row["pit"].get("datatype") == XSD + "dateTime":
        fact["point_in_time"] = _json_year(row["pit"]["value"], 9)
    value = row["v"]
    if value["type"] in ("uri", "bnode"):
        qid = qid_from_iri(value["value"]) if value["type"] == "uri" else None
        if qid:
            fact.update(value_type="item", value_qid=qid)
        elif value["type"] == "bnode" or "/.well-known/genid/" in value["value"]:
            fact["reject"] = "unknown_value"
        else:
            fact["reject"] = "unsupported_value_type"
        fact["raw"] = value["value"]
        return fact
    datatype = value.get("datatype", XSD + "string")
    text = value["value"]
    if "xml:lang" in value:
        fact.update(value_type="monolingualtext", value_label=text)
    elif datatype == XSD + "string":
        fact.update(value_type="string", value_label=text)
    elif datatype in NUMERIC:
        amount = row.get("amount", value)["value"]
        unit = qid_from_iri(row["unit"]["value"]) if "unit" in row else None
        fact.update(value_type="quantity", amount=float(amount), unit_qid=None if unit == UNIT_ONE else unit)
    elif datatype == XSD + "dateTime":
        time = row.get("time", value)["value"]
        fact.update(value_type="time", time=time if time[:1] in "+-" else "+" + time)
        if "precision" in row:
            fact["precision"] = int(row["precision"]["value"])
            fact["time"] = _json_year(time, fact["precision"])
        else:
            fact["reject"] = "time_without_precision"
    else:
        fact["reject"] = "unsupported_value_type"
        fact["raw"] = text
    return fact


def _json_year(time: str, precision: int) -> str:
    """An RDF time (XSD 1.1 years) as Wikidata's JSON writes it: ``+1889-...``, 44 BC as ``-0044``.

    Wikibase's RDF export moves years before the common era up by one at year precision
    or finer (``-0043`` is 44 BC, ``0000`` is 1 BC); coarser precisions are not moved.
    """
    match = re.fullmatch(r"([+-]?)(\d+)(-.*)", time)
    if match is None:
        return time if time[:1] in "+-" else "+" + time
    sign, digits, rest = match.groups()
    year = -int(digits) if sign == "-" else int(digits)
    if precision >= 9 and year <= 0:
        year -= 1
    return f"{'-' if year < 0 else '+'}{abs(year):04d}{rest}"


def _accept(candidates: Iterable[dict], labels: dict[str, str], rejects: Rejects, source: str) -> list[dict]:
    facts: list[dict] = []
    seen: set[tuple] = set()
    for fact in candidates:
        where = f"{source}#{fact.get('subject_qid')}/{fact.get('property_id')}/hop{fact['hop']}"
        reason = fact.pop("reject", None)
        if reason is None and fact["value_type"] == "item":
            fact["value_label"] = labels.get(fact["value_qid"])  # None: kept, see the module docstring
        if reason is None and fact.get("unit_qid"):
            fact["unit_label"] = labels.get(fact["unit_qid"])
            if fact["unit_label"] is None:
                reason = "unit_without_label"
        if reason is None:
            key = (fact["subject_qid"], fact["property_id"], fact.get("value_qid"), fact.get("value_label"),
                   fact.get("amount"), fact.get("unit_qid"), fact.get("time"), fact.get("precision"))
            # one row per statement value: a second P585 of the same statement is a duplicate
            if key in seen:
                reason = "duplicate_value"
            seen.add(key)
        if reason is not None:
            rejects.add(reason, where, fact)
            continue
        fact.pop("raw", None)
        fact["subject_label"] = labels.get(fact["subject_qid"])
        facts.append(fact)
    return facts


def _sort_key(fact: dict) -> tuple:
    return (
        fact["hop"],
        id_sort_key(fact["subject_qid"]),
        id_sort_key(fact["property_id"]),
        fact["value_type"],
        id_sort_key(fact["value_qid"]) if fact.get("value_qid") else ("", 0),
        fact.get("amount") if fact.get("amount") is not None else 0.0,
        fact.get("time") or "",
        fact.get("precision") or 0,
        id_sort_key(fact["unit_qid"]) if fact.get("unit_qid") else ("", 0),
        fact.get("value_label") or "",
        fact.get("rank") or "",
    )



def linked_item_batches(link_dir: Path, batch_size: int) -> list[list[str]]:
    """The distinct items of every ``entity_links`` shard under ``link_dir``, sorted, in batches."""
    links = read_table(link_dir, "entity_links", schemas.ENTITY_LINKS)
    return list(batched(sorted(set(links["qid"].to_pylist())), batch_size))


def merge_fact_shards(stage_dir: Path, out: Path) -> Path:
    """All fact shards of ``stage_dir`` as one file ``out``, deduplicated, each fact at its smallest hop."""
    facts = cast(pl.DataFrame, pl.from_arrow(read_table(stage_dir, "facts", schemas.FACTS)))
    keys = [c for c in schemas.FACTS.names if c != "hop"]
    merged = facts.group_by(keys).agg(pl.col("hop").min()).select(schemas.FACTS.names).sort(
        ["subject_qid", "property_id", "value_qid", "value_label", "amount", "time"], nulls_last=True
    )
    write_parquet(schemas.conform(merged.to_arrow(), schemas.FACTS), out)  # shared with the questions tasks
    return out
