"""The build's source shards, which every stage after the sources works over: ``SourceShard`` names one
shard of one source unit by (source, unit, shard) and carries its build-wide number, the id later stages
(proposals, grounded, linking, questions) write their shard under.

Layout: a source's units are the sub-folders ``unit-UUUUU/`` of its stage folder (``sources_<kind>/``),
each a stage folder of ``reasonvqa.stage`` with shards ``part-SSSSS``. Shards are numbered by
``list_shards`` and recorded in the work folder by ``write_shard_manifest``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import schemas, workstore
from reasonvqa.stage import part_name, stage_stats, write_json

UNIT_PREFIX = "unit-"


def unit_dirs(source_dir: Path) -> list[Path]:
    """The unit stage folders of a source folder (any streaming stage's folder), in unit order."""
    return workstore.subfolders(Path(source_dir), UNIT_PREFIX)


def source_stats(source_dir: Path) -> list[dict]:
    """The shard stats of every unit of a source folder, in unit then shard order."""
    return [stats for folder in unit_dirs(source_dir) for stats in stage_stats(folder)]


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

    def has(self, table: str) -> bool:
        """Whether the source wrote the shard's ``table`` (asked of the work folder URL, not fetched)."""
        return workstore.exists(self.file(table))

    def inputs(self, tables: Iterable[str]) -> dict[str, Path | None]:
        """``{table: its file, or None when the source wrote none}``: a stage's unit (``Stage.read``)."""
        return {name: self.file(name) if self.has(name) else None for name in tables}

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
