"""Visual Genome source: stream the released JSON files into image-aligned shards.

Inputs in one folder: ``image_data.json`` (required), ``objects.json`` (required, or
``scene_graphs.json`` with objects and relationships per image instead), and optional
``attributes.json`` and ``relationships.json``. Files are streamed with ijson, never
loaded whole (objects.json is ~400 MB, scene_graphs.json needs >6 GB in memory);
only image_data.json (~20 MB) is read into an index.

Output: one stage folder with tables ``images``, ``objects``, ``relations``,
``attributes`` (see reasonvqa/schemas.py) and the usual ``_rejects``/``_stats``/``_done``.
Ids: ``vg:<image_id>``, ``vg:<image_id>/o<object_id>``, ``vg:<image_id>/r<relationship_id>``.
Record parsing and the box policy: tasks/sources/vg_records.py; accounting:
tasks/sources/vg_shard.py; file alignment: tasks/sources/vg_merge.py.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Literal, NamedTuple

from pydantic import Field

from reasonvqa.gc_pause import gc_paused
from reasonvqa.jsonstream import StreamFailure, iter_json_array
from reasonvqa.snapshot import folder_snapshot_id
from reasonvqa.sources import Source, SourceConfig, require_folder
from reasonvqa.stage import RereadUnit, StageResult
from reasonvqa.tasks.sources.ingest import ingest_unit
from reasonvqa.tasks.sources.vg_merge import AlignedCursor, OutOfOrder, PartitionedCursor, ShardPlan, partition_file
from reasonvqa.tasks.sources.vg_shard import ImageIndex, VgShardBuilder, build_image_index

IMAGE_DATA = "image_data.json"
OBJECTS = "objects.json"
SCENE_GRAPHS = "scene_graphs.json"
ATTRIBUTES = "attributes.json"
RELATIONSHIPS = "relationships.json"


@dataclass(frozen=True)
class VgFiles:
    """The files one build reads, in the order a shard must consume them."""

    image_data: Path
    primary: Path  # objects.json or scene_graphs.json
    attributes: Path | None
    relationships: Path | None
    missing: tuple[str, ...]  # optional files that are absent
    ignored: tuple[str, ...]  # present but not read (superseded by another file)

    def annotation_files(self) -> list[tuple[str, Path]]:
        files = [("primary", self.primary), ("attributes", self.attributes), ("relationships", self.relationships)]
        return [(kind, p) for kind, p in files if p is not None]


def locate_files(folder: Path) -> VgFiles:
    """Find the Visual Genome files in ``folder``; FileNotFoundError names a missing required one."""
    folder = Path(folder)
    for name in (IMAGE_DATA, OBJECTS, SCENE_GRAPHS, ATTRIBUTES, RELATIONSHIPS):
        if (folder / name).exists() and not (folder / name).is_file():  # a folder would be taken for "absent"
            raise FileNotFoundError(f"Visual Genome {name} is not a file: {folder / name}")
    image_data = folder / IMAGE_DATA
    if not image_data.is_file():
        raise FileNotFoundError(f"Visual Genome image metadata not found: {image_data}")
    objects, scene_graphs = folder / OBJECTS, folder / SCENE_GRAPHS
    relationships, attributes = folder / RELATIONSHIPS, folder / ATTRIBUTES
    ignored: list[str] = []
    missing: list[str] = []
    if objects.is_file():
        primary, relations = objects, relationships if relationships.is_file() else None
        if relations is None:
            missing.append(RELATIONSHIPS)
        if scene_graphs.is_file():
            ignored.append(SCENE_GRAPHS)
    elif scene_graphs.is_file():
        primary, relations = scene_graphs, None  # scene graphs carry their own relationships
        if relationships.is_file():
            ignored.append(RELATIONSHIPS)
    else:
        raise FileNotFoundError(f"Visual Genome objects not found: {objects} (nor {scene_graphs})")
    if not attributes.is_file():
        missing.append(ATTRIBUTES)
    return VgFiles(
        image_data=image_data,
        primary=primary,
        attributes=attributes if attributes.is_file() else None,
        relationships=relations,
        missing=tuple(sorted(missing)),
        ignored=tuple(ignored),
    )


def read_image_index(path: Path) -> tuple[ImageIndex, StreamFailure | None]:
    """Index image_data.json as it streams (raw rows are kept only when rejected), and its failure if any."""
    failures: list[StreamFailure] = []

    def rows() -> Iterator[Any]:
        for item in iter_json_array(path):
            if isinstance(item, StreamFailure):
                failures.append(item)
            else:
                yield item[1]

    index = build_image_index(rows())
    return index, failures[0] if failures else None


class VgConfig(SourceConfig):
    """Visual Genome options: COCO instances files for the images that are COCO images."""

    kind: Literal["vg"] = "vg"
    # left out of dumps when empty, so configs (and their hashes) without it read as before it existed
    coco_instances: list[Path] = Field(default_factory=list, exclude_if=lambda value: not value,
                                       description="COCO instances files (instances_train2014.json, ...): images "
                                       "with a coco_id found there may have a COCO category not annotated on them "
                                       "claimed absent (basis taxonomy; tasks/sources/coco_instances.py).")


class PartitionedPass(NamedTuple):
    """The unit value of a second read: files not in image_data order are partitioned first."""

    reason: str


class VgSource(Source):
    """Visual Genome v1.2/v1.4 folder: one work unit (the files are read front to back together)."""

    kind = "vg"
    config_model: ClassVar[type[SourceConfig]] = VgConfig
    visual_domain = "mixed"  # everyday indoor and outdoor scenes (YFCC100M and MS-COCO images)
    license = "CC BY 4.0"
    redistributable = True
    redistribution = "Visual Genome (images included) is released under CC BY 4.0 (attribution)"
    description = "Visual Genome: image_data.json with objects.json (or scene_graphs.json), attributes, relationships"

    def check(self, config: SourceConfig) -> None:
        locate_files(require_folder(config))
        for path in self.typed(config).coco_instances:
            if not Path(path).is_file():
                raise FileNotFoundError(f"COCO instances file not found: {path}")

    def snapshot(self, config: SourceConfig) -> str:
        """The files directly in ``path``, and the COCO instances files when the config names any."""
        own = folder_snapshot_id(config.path, recursive=False)
        coco = [folder_snapshot_id(Path(p)) for p in self.typed(config).coco_instances]
        return own if not coco else "sha256:" + hashlib.sha256("\0".join([own, *coco]).encode()).hexdigest()

    def read(self, config: SourceConfig, unit: Any, shard_size: int) -> Iterator[StageResult]:
        """Shards of ``shard_size`` image_data rows; ``config.max_images`` keeps the first N rows
        of image_data.json and the annotations of those images.

        The first read assumes the annotation files list images in image_data order (as released);
        a file that does not raises ``RereadUnit`` with a ``PartitionedPass``.
        """
        files = locate_files(Path(config.path))
        index, image_failure = read_image_index(files.image_data)
        selected = len(index.entries) if config.max_images is None else min(config.max_images, len(index.entries))
        plan = ShardPlan(index, selected, shard_size)
        extra = {
            "source": self.kind,
            "primary_file": files.primary.name,
            "missing_files": list(files.missing),
            "ignored_files": list(files.ignored),
            "merge": "aligned",
        }
        if isinstance(unit, PartitionedPass):
            extra["merge"] = "partitioned"
            extra["merge_reason"] = unit.reason
            return self._partitioned(plan, files, extra, image_failure)
        return self._aligned(plan, files, extra, image_failure)

    def _aligned(self, plan: ShardPlan, files: VgFiles, extra: dict, image_failure: StreamFailure | None) -> Iterator[StageResult]:
        aligned = {kind: AlignedCursor(p, plan) for kind, p in files.annotation_files()}
        try:
            with gc_paused():
                yield from _shards(plan, aligned, files, extra, image_failure)
        except OutOfOrder as disorder:
            raise RereadUnit(PartitionedPass(str(disorder)), str(disorder)) from disorder
        finally:
            for cursor in aligned.values():
                cursor.close()

    def _partitioned(self, plan: ShardPlan, files: VgFiles, extra: dict, image_failure: StreamFailure | None) -> Iterator[StageResult]:
        if self.scratch_dir is not None:
            Path(self.scratch_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".vg-spill-", dir=self.scratch_dir) as spill, gc_paused():
            partitioned = {kind: partition_file(p, plan, Path(spill) / kind) for kind, p in files.annotation_files()}
            extra["skipped_outside_selection"] = sum(c.skipped_outside for c in partitioned.values())
            yield from _shards(plan, partitioned, files, extra, image_failure)


def ingest_vg(path: Path, stage_dir: Path, shard_size: int = 5000, max_images: int | None = None) -> list[dict]:
    """Read a Visual Genome folder into ``stage_dir``; return the per-shard stats.

    A finished stage (``_done/ALL``) is not read again. ``max_images`` keeps the first
    N rows of image_data.json and the annotations of those images.
    """
    stage_dir = Path(stage_dir)
    config = VgSource.config_model(kind=VgSource.kind, path=Path(path), max_images=max_images)
    source = VgSource()
    source.scratch_dir = stage_dir.parent
    return ingest_unit(source, config, str(config.path), stage_dir, shard_size)


def _shards(
    plan: ShardPlan,
    cursors: dict[str, AlignedCursor] | dict[str, PartitionedCursor],
    files: VgFiles,
    extra: dict,
    image_failure: StreamFailure | None,
) -> Iterator[StageResult]:
    for shard in range(plan.n_shards):
        builder = VgShardBuilder(shard, plan.index, extra)
        if shard == 0 and image_failure is not None:
            builder.add_failure(image_failure)
        for pos in plan.positions(shard):
            builder.add_image_row(pos)
        for kind, cursor in cursors.items():
            add = {"primary": builder.add_primary, "attributes": builder.add_attributes, "relationships": builder.add_relationships}[kind]
            label = getattr(files, kind).name
            for item in cursor.take(shard):
                if isinstance(item, StreamFailure):
                    builder.add_failure(item)
                else:
                    add(label, item[0], item[1])
        yield builder.result()
