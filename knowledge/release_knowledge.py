"""The knowledge a release carries, and reading it back for ``reasonvqa build --knowledge-from RELEASE``.

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

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import schemas, workstore
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.recorded import TABLE as QUERIES_TABLE, merge_answers, write_replay_file
from reasonvqa.stage import read_table

FACTS_TABLE = "knowledge"
LINKS_TABLE = "entity_links"
KNOWLEDGE_TABLES = (FACTS_TABLE, QUERIES_TABLE, LINKS_TABLE)
KNOWLEDGE_INPUTS = ("knowledge", "knowledge_date")


class ReleaseKnowledgeError(ValueError):
    """The release given to ``--knowledge-from`` cannot be rebuilt from (not verified, or no knowledge)."""


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


@dataclass(frozen=True)
class SourceKnowledge:
    """What a rebuild takes from a release: its knowledge inputs, recorded answers and config."""

    release: Path
    inputs: dict[str, str]  # knowledge, knowledge_date
    answers: pa.Table  # schemas.KNOWLEDGE_QUERIES
    config: dict  # the release manifest's config
    answers_digest: str  # the answers' files' sha256 as the manifest lists them (keys a rebuild's work folder)


def open_release_knowledge(release: Path) -> SourceKnowledge:
    """The knowledge of a verified release (ReleaseKnowledgeError when verify finds a problem, or the release
    was written before releases carried their knowledge)."""
    from reasonvqa.tasks.release.reader import read_split
    from reasonvqa.tasks.release.verify import verify_release
    from reasonvqa.tasks.release.writer import MANIFEST

    release = Path(release)
    if not (release / MANIFEST).is_file():
        raise ReleaseKnowledgeError(f"{release}: not a release folder (no {MANIFEST})")
    problems = verify_release(release)
    if problems:
        raise ReleaseKnowledgeError(f"{release}: fails verification ({len(problems)} problem(s), first: "
                                    f"{problems[0]}); see reasonvqa verify")
    manifest = json.loads((release / MANIFEST).read_text(encoding="utf-8"))
    missing = [t for t in (FACTS_TABLE, QUERIES_TABLE) if t not in manifest.get("tables", [])]
    absent = [k for k in KNOWLEDGE_INPUTS if k not in manifest.get("inputs", {})]
    if missing or absent:
        raise ReleaseKnowledgeError(
            f"{release}: carries no knowledge to rebuild from (no {', '.join(missing) or 'inputs ' + ', '.join(absent)}"
            "; releases written before 2026-12 hold none): rebuild it against its endpoint or mirror")
    answer_files = sorted(rel for rel in manifest["files"] if rel.startswith(f"{QUERIES_TABLE}/"))
    digest = ",".join(manifest["files"][rel]["sha256"] for rel in answer_files)
    inputs = {k: manifest["inputs"][k] for k in KNOWLEDGE_INPUTS}
    return SourceKnowledge(release, inputs, read_split(release, QUERIES_TABLE, schemas.KNOWLEDGE_QUERIES),
                           manifest.get("config", {}), digest)


def replay_file(recorded: SourceKnowledge, work_dir: Path) -> Path:
    """The release's recorded answers as one file of the work folder, which every knowledge shard reads."""
    path = write_replay_file(recorded.answers, work_dir / "knowledge_replay.parquet")
    workstore.push(path)
    return path


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
