"""The knowledge stages: ``LinkStage`` (a source shard's objects -> Wikidata items) and ``FactsStage``
(a batch of linked items -> up to 3 hops of facts), each shard's SPARQL answers recorded beside its
output (``knowledge/recorded.py``) and cached per shard (``knowledge/wikidata.py``'s query cache); on the
embedded mirror served by this process, the facts' statements queries are answered from its store
(``knowledge/mirror_statements.py``).

Their config names the endpoint and caches of the build (``KnowledgeShardConfig``); ``replay``
answers every query from a release's recorded answers instead (offline: no endpoint, no cache).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from reasonvqa import schemas
from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.rate_limit import query_throttle
from reasonvqa.stage import StageResult
from reasonvqa.stage_contract import ShardContext, Stage


class KnowledgeShardConfig(BaseModel):
    """What a linking or facts shard queries: the endpoint, the knowledge config, the SPARQL cache folder
    and key, the properties facts are fetched for, or a replay file of recorded answers."""

    model_config = ConfigDict(extra="forbid")

    knowledge: KnowledgeConfig
    endpoint: str
    cache_dir: Path
    cache_key: str | None = None
    properties: list[str] = []
    replay: Path | None = None


@contextlib.contextmanager
def knowledge_client(config: KnowledgeShardConfig, cache_name: str) -> Iterator[Any]:
    """The SPARQL client of a linking or facts shard: the endpoint's, its answers cached in
    ``<cache_dir>/<cache_name>.jsonl``, or a replay of recorded answers (no cache)."""
    if config.replay is not None:
        from reasonvqa.knowledge.recorded import replay_client

        yield replay_client(config.replay)
        return
    from reasonvqa.knowledge.mirror import served_store
    from reasonvqa.knowledge.wikidata import WikidataClient, query_cache

    with query_cache(config.cache_dir, cache_name) as cache:
        client = WikidataClient(config.endpoint, config.knowledge, cache, cache_key=config.cache_key,
                                throttle=query_throttle(config.knowledge))
        store = served_store(config.endpoint)
        if store is None:  # a remote endpoint, or a mirror served by another process
            yield client
            return
        from reasonvqa.knowledge.mirror_statements import StatementsClient

        yield StatementsClient(client, store)  # the mirror this process serves: statements from its store


class LinkStage(Stage):
    """Link one source shard's objects to Wikidata items (unit: its ``SourceShard``; written as link
    shard ``shard.number``)."""

    name = "link"
    inputs = {"objects": schemas.OBJECTS}

    def read(self, unit: Any) -> dict[str, pa.Table]:
        return {"objects": unit.table("objects")}

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        from reasonvqa.knowledge.linking import link_objects
        from reasonvqa.knowledge.recorded import RecordingClient, with_answers

        config: KnowledgeShardConfig = self.config  # type: ignore[assignment]
        shard = ctx.unit
        with knowledge_client(config, f"link-{shard.number:05d}") as queried:
            client = RecordingClient(queried)
            source_file = shard.file("objects").relative_to(shard.stage_dir.parent.parent).as_posix()
            return with_answers(link_objects(inputs["objects"], client, config.knowledge, shard.number,
                                             source_file=source_file), client)


class FactsStage(Stage):
    """Fetch up to 3 hops of facts for one batch of linked items (unit: the batch's QIDs)."""

    name = "facts"

    def read(self, unit: Any) -> dict[str, pa.Table]:
        return {"items": pa.table({"qid": pa.array(list(unit), pa.string())})}

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        from reasonvqa.knowledge.facts import fetch_facts
        from reasonvqa.knowledge.recorded import RecordingClient, with_answers

        config: KnowledgeShardConfig = self.config  # type: ignore[assignment]
        with knowledge_client(config, f"facts-{ctx.shard:05d}") as queried:
            client = RecordingClient(queried)
            return with_answers(fetch_facts(inputs["items"]["qid"].to_pylist(), client, config.knowledge,
                                            config.properties, ctx.shard), client)
