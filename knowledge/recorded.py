"""Record the SPARQL answers a build uses, and replay them offline (``reasonvqa build --knowledge-from``).

The linking and facts stages talk to a ``SparqlClient``. During a build each stage's client is wrapped in a
``RecordingClient``: every answer is put in a canonical order (rows sorted by their JSON; the endpoint's row
order is arbitrary) before the stage sees it, and kept. The answers go into the release as the
``knowledge_queries`` table (``schemas.KNOWLEDGE_QUERIES``). A rebuild from that release answers the same
queries with a ``ReplayClient`` over the table: no endpoint, no mirror, the same answers in the same order,
hence the same links, facts, questions and release bytes. A query the release holds no answer to (another
config or code that asks other questions) fails the shard, naming the query.
"""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path
from typing import cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.knowledge.wikidata import Binding, SparqlClient, WrappedClient
from reasonvqa.stage import StageResult, write_parquet

TABLE = schemas.QUERIES_TABLE


class KnowledgeNotRecorded(LookupError):
    """A rebuild asked a query whose answer the source release does not hold."""


def canonical_answer(bindings: list[Binding]) -> str:
    """The answer as the release stores it: rows sorted by their JSON text, keys sorted, no spaces."""
    rows = sorted(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")) for row in bindings)
    return "[" + ",".join(rows) + "]"


class RecordingClient(WrappedClient):
    """A ``SparqlClient`` that answers through ``client`` in canonical row order and keeps every answer."""

    def __init__(self, client: SparqlClient):
        super().__init__(client)
        self.answers: dict[str, str] = {}
        self._lock = threading.Lock()

    def select(self, query: str) -> list[Binding]:
        answer = canonical_answer(self.client.select(query))
        with self._lock:
            self.answers[query] = answer
        return json.loads(answer)

    def table(self) -> pa.Table:
        """The recorded answers (``schemas.KNOWLEDGE_QUERIES``), in query order."""
        queries = sorted(self.answers)
        return pa.table({"query": queries, "answer": [self.answers[q] for q in queries]},
                        schema=schemas.KNOWLEDGE_QUERIES)


def with_answers(result: StageResult, recorder: RecordingClient) -> StageResult:
    """``result`` with the recorder's answers as one more output table (not counted as the stage's rows out)."""
    result.rows_out = result.counted_out()
    result.outputs[TABLE] = recorder.table()
    return result


def merge_answers(tables: list[pa.Table]) -> pa.Table:
    """One answer per query over every shard's recorded answers, in query order.

    Shards of one build share the query cache, so a query asked twice got the same answer; should a live
    endpoint have answered differently between two uncached asks, the smallest answer is kept (a rebuild
    then replays that one for both)."""
    if not tables:
        return schemas.KNOWLEDGE_QUERIES.empty_table()
    answers = cast(pl.DataFrame, pl.from_arrow(pa.concat_tables([schemas.conform(t, schemas.KNOWLEDGE_QUERIES) for t in tables])))
    merged = answers.group_by("query").agg(pl.col("answer").min()).sort("query")
    return schemas.conform(merged.to_arrow(), schemas.KNOWLEDGE_QUERIES)


class ReplayClient:
    """A ``SparqlClient`` answering from recorded answers only (``KnowledgeNotRecorded`` for any other query)."""

    def __init__(self, answers: dict[str, str], origin: str):
        self.answers = answers
        self.origin = origin
        self.requests = 0  # nothing is ever sent
        self.cache_hits = 0

    @classmethod
    def from_table(cls, table: pa.Table, origin: str) -> "ReplayClient":
        table = schemas.conform(table, schemas.KNOWLEDGE_QUERIES)
        return cls(dict(zip(table["query"].to_pylist(), table["answer"].to_pylist())), origin)

    def select(self, query: str) -> list[Binding]:
        answer = self.answers.get(query)
        if answer is None:
            first = next((line.strip() for line in query.splitlines() if line.startswith("SELECT")), query[:80])
            raise KnowledgeNotRecorded(
                f"{self.origin}: the release's knowledge holds no answer to the query {first!r} "
                f"({len(self.answers)} answers recorded); rebuild with the release's own config "
                "(its manifest's `config`), or build against an endpoint")
        self.cache_hits += 1
        return json.loads(answer)


def replay_client(path: Path) -> ReplayClient:
    """The replay client of a recorded answers file (``write_replay_file``), read once per process."""
    path = Path(path)
    stat = path.stat()
    return _replay(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _replay(path: str, size: int, mtime_ns: int) -> ReplayClient:
    return ReplayClient.from_table(pq.read_table(path), path)


def write_replay_file(answers: pa.Table, path: Path) -> Path:
    """Write the answers a rebuild replays as one Parquet file (read by every linking and facts shard; put
    to a work folder URL, like every file ``reasonvqa.stage`` writes)."""
    write_parquet(schemas.conform(answers, schemas.KNOWLEDGE_QUERIES), path)
    return path
