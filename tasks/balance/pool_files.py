"""The merged question pool as a list of Parquet files: the input of ``partitioned.plan_partitioned``.

``merge_kinds`` (flows/assemble_release.py) concatenates every question shard, the other kinds'
tables and a verified-QA file into one table. For a pool balanced on disk that table is
never needed: ``merge_pool_files`` goes through the same inputs one file (or table) at a time,
conforms each to QUESTIONS and applies the kind selection, and hands a shard file over as it is
when nothing in it changes (else writes the changed rows to ``folder``). The partitioned path
orders rows by question_id itself and its decisions do not depend on the input row order, so the
release is the same bytes as from the merged table (tests/flows/test_build_partitioned.py).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import schemas
from reasonvqa.tasks.balance.kind_filters import KindSelection, add_select_reports, require_selected, select_kinds_part
from reasonvqa.tasks.balance.merge import require_distinct_ids


@dataclass
class PoolFiles:
    """A question pool held in Parquet files of the QUESTIONS schema (rows in no particular order)."""

    paths: list[Path]
    num_rows: int
    image_id_table: pa.Table  # the pool's distinct image ids, one column (found while the files were merged)

    def image_ids(self) -> pa.Table:
        """The pool's distinct image ids as a one-column table."""
        return self.image_id_table

    def read(self) -> pa.Table:
        """The pool in memory: the table ``merge_kinds`` gives for the same inputs (files in order, unsorted)."""
        table = pa.concat_tables([pq.read_table(p) for p in self.paths])
        return schemas.conform(table, schemas.QUESTIONS)


def pool_rows(templated: list[Path], others: list[pa.Table], verified_questions: Path | None) -> int:
    """The merged pool's rows before the kind selection, from the files' footers (nothing read)."""
    files = [*templated, *([verified_questions] if verified_questions is not None else [])]
    return sum(pq.ParquetFile(p).metadata.num_rows for p in files) + sum(t.num_rows for t in others)


def merge_pool_files(templated: list[Path], others: list[pa.Table], verified_questions: Path | None,
                     selection: KindSelection, folder: Path) -> tuple[PoolFiles, dict]:
    """The pool ``merge_kinds`` would build, as files, and its kind-selection report.

    ``templated`` are the question shard files; ``others`` the in-memory tables of other kinds;
    ``verified_questions`` a build-verified-qa ``questions.parquet``. Rows that need conforming or
    filtering are written to ``folder`` (emptied first), one file per input. Raises ValueError when
    a question id occurs twice and EmptySelectionError when the selection leaves nothing.
    """
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    paths, reports, rows, question_ids, image_ids = [], [], 0, [], []
    for k, (path, table) in enumerate(_inputs(templated, others, verified_questions)):
        conformed = schemas.conform(table, schemas.QUESTIONS)
        question_ids.append(conformed["question_id"])
        selected, report = select_kinds_part(conformed, selection)
        image_ids.append(pc.unique(selected["image_id"].combine_chunks()))
        reports.append(report)
        rows += selected.num_rows
        if path is not None and selected.num_rows == table.num_rows and table.schema.equals(schemas.QUESTIONS):
            paths.append(path)  # a shard file already in the pool's schema, every row kept: handed over as is
        elif selected.num_rows or not paths:
            paths.append(folder / f"pool-{k:05d}.parquet")
            pq.write_table(selected, paths[-1])
        del table, conformed, selected
    if not reports:  # no input at all: one empty file, as the merged empty pool would be written
        paths.append(folder / "pool-00000.parquet")
        pq.write_table(schemas.QUESTIONS.empty_table(), paths[-1])
        reports.append(select_kinds_part(schemas.QUESTIONS.empty_table(), selection)[1])
    require_distinct_ids(pa.chunked_array([c for ids in question_ids for c in ids.chunks], pa.string()))
    report = add_select_reports(reports)
    require_selected(report)
    images = pc.unique(pa.chunked_array(image_ids, pa.string()))
    return PoolFiles(paths, rows, pa.table({"image_id": images})), report


def _inputs(templated: list[Path], others: list[pa.Table],
            verified_questions: Path | None) -> Iterator[tuple[Path | None, pa.Table]]:
    """(file or None, its rows) for each input, in ``merge_pools``' order, one file in memory at a time."""
    for path in templated:
        yield path, pq.read_table(path)
    for table in others:
        yield None, table
    if verified_questions is not None:
        yield None, pq.read_table(verified_questions)
