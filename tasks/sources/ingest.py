"""Read one work unit of a registered source into a stage folder, and list the shards read.

Layout: a source's units live under ``<work>/sources_<kind>/unit-UUUUU/`` (``UUUUU`` the
unit's position in ``Source.plan``), each a stage folder of ``reasonvqa.stage`` with shards
``part-SSSSS``. ``SourceShard`` names one shard by (source, unit, shard) and carries its
build-wide number, the id downstream stages (linking, questions) write their shard under.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas, workstore
from reasonvqa.sources import RereadUnit, Source, SourceConfig, with_source_columns
from reasonvqa.stage import StageResult, part_name, run_stream, stage_stats, write_json

UNIT_PREFIX = "unit-"


def source_stage_dir(work_dir: Path, kind: str) -> Path:
    """The folder holding every unit of source ``kind`` in a build's work folder."""
    return Path(work_dir) / f"sources_{kind}"


def unit_dir(source_dir: Path, unit_index: int) -> Path:
    return Path(source_dir) / f"{UNIT_PREFIX}{unit_index:05d}"


def unit_dirs(source_dir: Path) -> list[Path]:
    """The unit stage folders of a source folder, in unit order."""
    return workstore.subfolders(Path(source_dir), UNIT_PREFIX)


def source_stats(source_dir: Path) -> list[dict]:
    """The shard stats of every unit of a source folder, in unit then shard order."""
    return [stats for folder in unit_dirs(source_dir) for stats in stage_stats(folder)]


def ingest_unit(source: Source, config: SourceConfig, unit: Any, stage_dir: Path, shard_size: int) -> list[dict]:
    """Read ``unit`` of ``source`` into ``stage_dir``, one shard per StageResult; return the shard stats.

    A finished unit (``_done/ALL``) is not read again. A ``RereadUnit`` from the source discards
    the shards written so far and reads the unit again as the source asks.
    """
    stage_dir = Path(stage_dir)
    if workstore.exists(stage_dir / "_done" / "ALL"):
        return stage_stats(stage_dir)
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    while True:
        try:
            return run_stream(stage_dir, _stamped(source, source.read(config, unit, shard_size)))
        except RereadUnit as again:
            unit = again.unit


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
