"""One question pool of every kind: templated, grounded, VLM-grounded and verified (PROVE) questions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas


def merge_pools(templated: pa.Table, others: list[pa.Table], verified_questions: Path | None = None) -> pa.Table:
    """Concatenate question tables in the one QUESTIONS schema, in input order (templated first).

    Not sorted: the release orders its rows by question_id itself (``balance.pipeline.plan_release``,
    the partitioned path) and its decisions do not depend on the pool's row order, so sorting here
    would only repeat that work (a full sort and gather of the pool).

    ``verified_questions`` is the ``questions.parquet`` of a build-verified-qa run; a question id
    that occurs twice is an error (kinds hash different parts, so it means the same file twice).
    """
    tables = [schemas.conform(templated, schemas.QUESTIONS)] + [schemas.conform(t, schemas.QUESTIONS) for t in others]
    if verified_questions is not None:
        verified = pq.read_table(verified_questions)
        tables.append(schemas.conform(verified, schemas.QUESTIONS))
    pool = pa.concat_tables(tables)
    require_distinct_ids(pool["question_id"])
    return pool


def require_distinct_ids(ids: pa.ChunkedArray) -> None:
    """ValueError when a question id occurs twice among the merged inputs (before any kind selection).

    Null ids are not repeats: the balancing rejects those rows with the reason ``missing_question_id``.
    The check sorts the ids' bytes (``codes.sort_with_repeats``), cheaper than Arrow's hash count."""
    from reasonvqa.codes import sort_with_repeats

    if len(ids) > 1 and sort_with_repeats(ids)[1].any():
        raise ValueError("the merged question pool repeats a question_id (the same questions merged twice?)")
