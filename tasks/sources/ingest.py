"""The sources stage (``SourcesStage``: one unit of a registered source into a stage folder).

Layout: a source's units live under ``<work>/sources_<kind>/unit-UUUUU/`` (``UUUUU`` the
unit's position in ``Source.plan``), each a stage folder of ``reasonvqa.stage`` with shards
``part-SSSSS``; the runner names a unit's task run ``read-<kind>-unit-UUUUU``. The shards a build's
later stages work over (``SourceShard``, their numbering and manifest) are the core's ``reasonvqa/shards.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from reasonvqa import schemas, sources
from reasonvqa.sources import SOURCE_TABLES, Source, SourceConfig, with_source_columns
from reasonvqa.stage import StageResult, write_unit
from reasonvqa.stage_contract import ShardContext, Stage


def source_stage_dir(work_dir: Path, kind: str) -> Path:
    """The folder holding every unit of source ``kind`` in a build's work folder."""
    return Path(work_dir) / f"sources_{kind}"


def unit_dir(source_dir: Path, unit_index: int) -> Path:
    """The stage folder of unit ``unit_index`` of a source folder (``Stage.folder`` of a streaming stage)."""
    return SourcesStage.folder(Path(source_dir), unit_index)


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
