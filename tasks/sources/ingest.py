"""The sources stage (``SourcesStage``: one unit of a registered source into a stage folder), and the
shards read.

Layout: a source's units live under ``<work>/sources_<kind>/unit-UUUUU/`` (``UUUUU`` the
unit's position in ``Source.plan``), each a stage folder of ``reasonvqa.stage`` with shards
``part-SSSSS``; the runner names a unit's task run ``read-<kind>-unit-UUUUU``. ``SourceShard`` names one shard by (source, unit, shard) and carries its
build-wide number, the id downstream stages (linking, questions) write their shard under.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from reasonvqa import schemas, sources, workstore
from reasonvqa.sources import SOURCE_TABLES, Source, SourceConfig, with_source_columns
from reasonvqa.stage import StageResult, part_name, stage_stats, write_json, write_unit
from reasonvqa.stage_contract import ShardContext, Stage

UNIT_PREFIX = "unit-"


def source_stage_dir(work_dir: Path, kind: str) -> Path:
    """The folder holding every unit of source ``kind`` in a build's work folder."""
    return Path(work_dir) / f"sources_{kind}"


def unit_dir(source_dir: Path, unit_index: int) -> Path:
    """The stage folder of unit ``unit_index`` of a source folder (``Stage.folder`` of a streaming stage)."""
    return SourcesStage.folder(Path(source_dir), unit_index)


def unit_dirs(source_dir: Path) -> list[Path]:
    """The unit stage folders of a source folder, in unit order."""
    return workstore.subfolders(Path(source_dir), UNIT_PREFIX)


def source_stats(source_dir: Path) -> list[dict]:
    """The shard stats of every unit of a source folder, in unit then shard order."""
    return [stats for folder in unit_dirs(source_dir) for stats in stage_stats(folder)]


class SourceStageConfig(BaseModel):
    """The sources stage's config: one source (its own config model, every field kept) and the shard size."""

    model_config = ConfigDict(extra="forbid")

    source: SerializeAsAny[SourceConfig]
    shard_size: int = Field(ge=1)


class SourcesStage(Stage):
    """Read one work unit (``Source.plan``) of a registered source, one shard per ``shard_size`` images
    (a streaming stage: units are numbered by their place in the plan)."""

    name = "sources"
    outputs = {table: schemas.TABLES[table] for table in SOURCE_TABLES}
    streams = True

    def stream(self, unit: Any, ctx: ShardContext) -> Iterator[StageResult]:
        config: SourceStageConfig = self.config  # type: ignore[assignment]
        source = sources.get(config.source.kind, scratch_dir=ctx.stage_dir)
        return _stamped(source, source.read(config.source, unit, config.shard_size))


def ingest_unit(source: Source, config: SourceConfig, unit: Any, stage_dir: Path, shard_size: int) -> list[dict]:
    """Read ``unit`` of ``source`` into ``stage_dir``, one shard per StageResult; return the shard stats
    (``sources scan`` and readers outside a build; a build runs ``SourcesStage``).

    A finished unit (``_done/ALL``) is not read again. A ``RereadUnit`` from the source discards
    the shards written so far and reads the unit again as the source asks.
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    return write_unit(Path(stage_dir), unit, lambda u: _stamped(source, source.read(config, u, shard_size)))


def _stamped(source: Source, results: Iterator[StageResult]) -> Iterator[StageResult]:
    for result in results:
        if "images" in result.outputs:
            result.outputs["images"] = with_source_columns(result.outputs["images"], source)
        yield result


@dataclass(frozen=True)
class SourceShard:
    """One shard of one source unit, and its build-wide number (its id in later stages)."""

    number: int
    source: str
    unit: int
    shard: int
    stage_dir: Path  # the unit's stage folder

    def file(self, table: str) -> Path:
        """The shard's file of ``table`` (it may not exist: a source need not write every table)."""
        return self.stage_dir / table / f"{part_name(self.shard)}.parquet"

    def inputs(self, tables: Iterable[str]) -> dict[str, Path | None]:
        """``{table: its file, or None when the source wrote none}``: a stage's unit (``Stage.read``)."""
        return {name: path if workstore.exists(path := self.file(name)) else None for name in tables}

    def table(self, name: str) -> pa.Table:
        """The shard's table ``name`` (``schemas.TABLES``), empty when the source wrote none."""
        path = self.file(name)
        return pq.read_table(path) if workstore.fetch(path) else schemas.TABLES[name].empty_table()


def prefetch(shards: list[SourceShard], tables: list[str]) -> list[SourceShard]:
    """``shards``, with the files of ``tables`` they have present locally: for a work folder URL, one
    listing per unit folder and table, then one concurrent get, so ``SourceShard.table`` reads local
    copies instead of one GET after another (a build reads every shard's images)."""
    wanted = {shard.file(name) for shard in shards for name in tables}
    if not any(workstore.is_mirrored(path) for path in wanted):  # a local work folder: the files are here
        return shards
    folders = sorted({path.parent for path in wanted})
    workstore.fetch_all([path for folder in folders for path in workstore.listing(folder, "part-*.parquet")
                         if path in wanted])
    return shards


def list_shards(units: list[tuple[str, int, Path]]) -> list[SourceShard]:
    """Every shard of the given ``(kind, unit index, stage folder)`` units, numbered in that order.

    Shards are found by their stats files, so numbering depends only on what each unit
    wrote, never on which unit finished first.
    """
    shards: list[SourceShard] = []
    for kind, unit, stage_dir in units:
        for stats in stage_stats(Path(stage_dir)):
            shard = int(stats["shard"])
            shards.append(SourceShard(len(shards), kind, unit, shard, Path(stage_dir)))
    return shards


def write_shard_manifest(shards: list[SourceShard], path: Path, root: Path) -> Path:
    """Write ``[{number, source, unit, shard, stage_dir}]`` (folders relative to ``root``) as JSON."""
    write_json([{"number": s.number, "source": s.source, "unit": s.unit, "shard": s.shard,
                 "stage_dir": s.stage_dir.relative_to(root).as_posix()} for s in shards], path)
    return path
