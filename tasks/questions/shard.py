"""One questions shard: gather a source shard's tables and its entity links, then generate.

The question index depends only on the merged facts and the config, and the template bank only
on its files, so each is built once per worker process and shared by every shard that process
runs (parsing the bank's YAML took longer than generating a shard of 5,000 images).
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa.shards import SourceShard
from reasonvqa.stage import StageResult, fetched, part_name
from reasonvqa.tasks.questions.bank import TEMPLATES_DIR, TemplateBank, load_bank
from reasonvqa.tasks.questions.config import QuestionConfig
from reasonvqa.tasks.questions.fact_choices import prefetch
from reasonvqa.tasks.questions.index import KnowledgeIndex, build_index
from reasonvqa.tasks.questions.templated import generate_questions

_INDEX_LOCK = threading.Lock()
_BANK_LOCK = threading.Lock()


@functools.lru_cache(maxsize=2)
def _bank(templates_dir: Path, files: tuple[tuple[str, int, int], ...]) -> TemplateBank:
    return load_bank(templates_dir)


def _file_stamps(paths: list[Path]) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of each file: a cached object is reused only while these stay the same."""
    return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in paths)


def _bank_stamps(templates_dir: Path) -> tuple[tuple[str, int, int], ...]:
    return _file_stamps(sorted(Path(templates_dir).rglob("*.yaml")))


def shared_bank(templates_dir: Path = TEMPLATES_DIR) -> TemplateBank:
    """The template bank, loaded once per process while its files stay unchanged (name, size, mtime)."""
    with _BANK_LOCK:
        return _bank(Path(templates_dir), _bank_stamps(templates_dir))


@functools.lru_cache(maxsize=2)
def _index(facts: tuple[tuple[str, int, int], ...], bank: tuple[tuple[str, int, int], ...],
           config_json: str) -> KnowledgeIndex:
    with _BANK_LOCK:
        templates = _bank(Path(TEMPLATES_DIR), bank)
    return build_index(pq.read_table(facts[0][0]), templates, QuestionConfig.model_validate_json(config_json))


def shared_index(facts_path: Path, config: QuestionConfig) -> KnowledgeIndex:
    """The question index of a build's facts, built once per worker process (not per shard); rebuilt
    when the facts file or the template bank changes (a long-running ``serve`` process rebuilds)."""
    with _INDEX_LOCK:
        return _index(_file_stamps([Path(facts_path)]), _bank_stamps(TEMPLATES_DIR), config.model_dump_json())


def shard_links(link_dir: Path, shard: SourceShard) -> pa.Table:
    """The entity links the linking stage wrote for ``shard`` (under its build-wide number)."""
    return pq.read_table(fetched([Path(link_dir) / "entity_links" / f"{part_name(shard.number)}.parquet"])[0])


def questions_for_shard(shard: SourceShard, link_dir: Path, facts_path: Path, config: QuestionConfig,
                        seed: int, knowledge_snapshot: str) -> StageResult:
    """Templated questions for the images of one source shard (written as questions shard ``shard.number``)."""
    tables = (shard.table("images"), shard.table("objects"), shard.table("relations"), shard_links(link_dir, shard))
    bank, index = shared_bank(), shared_index(facts_path, config)
    prefetch(index, seed, bank, config)
    return generate_questions(*tables, None, bank, config, seed=seed, shard=shard.number,
                              knowledge_snapshot=knowledge_snapshot, index=index)
