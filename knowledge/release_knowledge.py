"""The knowledge a release carries (reading it back for ``--knowledge-from`` is tasks/release/knowledge_source.py).

A build's release holds three knowledge tables beside its questions:

- ``knowledge/``: the merged facts the questions were generated from (``schemas.KNOWLEDGE``: subject,
  property, value with unit, precision and the P585 qualifier, rank, labels, hop) and where and when they
  were fetched (the endpoint URL or the embedded mirror's id; the knowledge date);
- ``knowledge_queries/``: every SPARQL answer the linking and facts stages used (``recorded.py``);
- ``entity_links/``: how the objects of the released images were linked to items (``schemas.ENTITY_LINKS``).

A rebuild replays ``knowledge_queries`` and names its knowledge as the release did (the manifest's
``knowledge`` and ``knowledge_date`` inputs), so with the same config it writes the same bytes, offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.recorded import merge_answers, write_replay_file
from reasonvqa.schemas import FACTS_TABLE, LINKS_TABLE, QUERIES_TABLE
from reasonvqa.stage import read_table


def fetched_from(config: KnowledgeConfig, knowledge_input: str) -> str:
    """Where the facts came from: the endpoint URL, or ``oxigraph-mirror:<entities' content id>``."""
    return config.endpoint if config.endpoint else f"oxigraph-mirror:{knowledge_input}"


def knowledge_table(facts_path: Path, source: str, date: str) -> pa.Table:
    """The release's ``knowledge`` table: the build's merged facts with where (``source``) and when (``date``)."""
    facts = schemas.conform(pq.read_table(facts_path), schemas.FACTS)
    rows = facts.num_rows
    facts = facts.append_column("fetched_from", pa.array([source] * rows, pa.string()))
    return schemas.conform(facts.append_column("fetched_on", pa.array([date] * rows, pa.string())), schemas.KNOWLEDGE)


def links_of_images(links: pa.Table, images: pa.Array | pa.ChunkedArray) -> pa.Table:
    """The entity links of the objects of ``images`` (the images that have questions)."""
    links = schemas.conform(links, schemas.ENTITY_LINKS)
    return links.filter(pc.is_in(links["image_id"], pc.unique(images)))


def replay_file(answers: pa.Table, work_dir: Path) -> Path:
    """A release's recorded answers as one file of the work folder, which every knowledge shard reads."""
    return write_replay_file(answers, work_dir / "knowledge_replay.parquet")


def release_knowledge_tables(config: KnowledgeConfig, inputs: dict[str, str], facts_path: Path, link_dir: Path,
                             facts_dir: Path) -> Callable[[Any], dict[str, pa.Table]]:
    """The release's knowledge tables, given the pool (or its image ids): the merged facts with where and when
    they were fetched, every SPARQL answer the linking and facts shards used, the links of the pool's images."""
    facts = knowledge_table(facts_path, fetched_from(config, inputs["knowledge"]), inputs["knowledge_date"])
    answers = merge_answers([read_table(d, QUERIES_TABLE, schemas.KNOWLEDGE_QUERIES) for d in (link_dir, facts_dir)])
    links = read_table(link_dir, "entity_links", schemas.ENTITY_LINKS)

    def tables(used: Any) -> dict[str, pa.Table]:
        images = used["image_id"] if isinstance(used, pa.Table) else used
        return {FACTS_TABLE: facts, QUERIES_TABLE: answers, LINKS_TABLE: links_of_images(links, images)}

    return tables
