"""Route the per-image records of several Visual Genome files to image-aligned shards.

Shard ``k`` owns the image_data.json rows at positions ``[k*S, (k+1)*S)``; every record
of an annotation file goes to the shard of its image, so an image's objects,
attributes and relationships always meet in one shard.

Two ways to get there, chosen per build:

* ``AlignedCursor`` (normal case, constant memory): the released files list images
  in image_data.json's order, so each file is read once, front to back, keeping one
  record of look-ahead. A record whose image belongs to an already written shard
  raises ``OutOfOrder``.
* ``partition_files`` (fallback after ``OutOfOrder``): one pass per file writes each
  record as a JSON line into a spill file of its shard; shards then read their own
  spill files. Memory stays bounded, at the cost of a second copy on disk.

Records of images missing from image_data.json go to the shard being read when they
appear (the shard of the previous record of that file), where they are rejected.
With ``max_images``, reading a file stops at the first record of an image beyond the
selection (aligned) or skips such records (partitioned). The aligned stop is taken only
once the file has listed the last selected image; before that, a record beyond the
selection means the file is not in image_data order (a selected image may still
follow) and raises ``OutOfOrder``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from reasonvqa.jsonstream import StreamFailure, iter_json_array
from reasonvqa.tasks.sources.vg_records import record_image_id
from reasonvqa.tasks.sources.vg_shard import ImageIndex

Item = tuple[int, object] | StreamFailure
OUTSIDE = -1  # an image of image_data.json beyond the max_images selection
_SPILL_FLUSH_CHARS = 16 << 20


class OutOfOrder(RuntimeError):
    """A file lists an image after images of later shards (files not in image_data order)."""


@dataclass(frozen=True)
class ShardPlan:
    """Which image_data positions each shard owns."""

    index: ImageIndex
    selected: int  # number of image_data rows read (max_images)
    shard_size: int

    @property
    def last_selected(self) -> int:
        """Position of the last selected image_data row that owns an image id (-1 if none)."""
        return max((p for p in self.index.position.values() if p < self.selected), default=-1)

    @property
    def n_shards(self) -> int:
        return max(1, -(-self.selected // self.shard_size))

    def positions(self, shard: int) -> range:
        return range(shard * self.shard_size, min((shard + 1) * self.shard_size, self.selected))

    def target(self, item: Item) -> int | None:
        """Shard of the item's image; None when it has none (failure, unknown image); OUTSIDE."""
        if isinstance(item, StreamFailure):
            return None
        image_id = record_image_id(item[1])
        pos = self.index.position.get(image_id) if image_id is not None else None
        if pos is None:
            return None
        return pos // self.shard_size if pos < self.selected else OUTSIDE

    def is_last_selected(self, item: Item, last: int) -> bool:
        """True when ``item`` is a record of the image at image_data position ``last``."""
        if isinstance(item, StreamFailure):
            return False
        image_id = record_image_id(item[1])
        return image_id is not None and self.index.position.get(image_id) == last


@dataclass
class AlignedCursor:
    """Reads one file front to back, handing each shard its records in turn."""

    path: Path
    plan: ShardPlan
    stopped_at: int | None = None  # record index where max_images stopped the read
    _stream: Iterator[Item] | None = None
    _ahead: tuple[int | None, Item] | None = None
    _done: bool = False
    _last: int = -1  # image_data position of the last selected image
    _saw_last: bool = False

    def take(self, shard: int) -> Iterator[Item]:
        if self._stream is None:
            self._stream = iter_json_array(self.path)
            self._last = self.plan.last_selected
        while not self._done:
            if self._ahead is None:
                item = next(self._stream, None)
                if item is None:
                    self._done = True
                    return
                self._ahead = (self.plan.target(item), item)
            target, item = self._ahead
            if target == OUTSIDE:
                if not self._saw_last:
                    raise OutOfOrder(
                        f"{self.path.name}#[{item[0]}] is an image beyond max_images listed before "  # type: ignore[index]
                        f"the last selected image (image_data.json#[{self._last}])"
                    )
                self.stopped_at = item[0]  # type: ignore[index]
                self.close()
                return
            if target is not None and target > shard:
                return
            if target is not None and target < shard:
                raise OutOfOrder(
                    f"{self.path.name}#[{item[0]}] belongs to shard {target} but shard {shard} is being read"  # type: ignore[index]
                )
            self._ahead = None
            if not self._saw_last and target is not None:
                self._saw_last = self.plan.is_last_selected(item, self._last)
            yield item

    def close(self) -> None:
        self._done = True
        if self._stream is not None:
            self._stream.close()  # type: ignore[attr-defined]


@dataclass
class PartitionedCursor:
    """Reads the spill files that ``partition_files`` wrote for one input file."""

    folder: Path
    failures: dict[int, list[StreamFailure]] = field(default_factory=dict)
    skipped_outside: int = 0

    def take(self, shard: int) -> Iterator[Item]:
        spill = self.folder / f"{shard:05d}.jsonl"
        if spill.exists():
            with open(spill, encoding="utf-8") as handle:
                for line in handle:
                    index, record = json.loads(line)
                    yield index, record
        yield from self.failures.get(shard, [])

    def close(self) -> None:
        pass


def partition_file(path: Path, plan: ShardPlan, folder: Path) -> PartitionedCursor:
    """Spill every record of ``path`` into ``folder/<shard>.jsonl`` (file order kept within a shard)."""
    folder.mkdir(parents=True, exist_ok=True)
    cursor = PartitionedCursor(folder)
    buffers: dict[int, list[str]] = {}
    buffered = 0
    last = 0
    for item in iter_json_array(path):
        target = plan.target(item)
        if target == OUTSIDE:
            cursor.skipped_outside += 1
            continue
        target = last if target is None else target
        last = target
        if isinstance(item, StreamFailure):
            cursor.failures.setdefault(target, []).append(item)
            continue
        line = json.dumps(item, ensure_ascii=False) + "\n"
        buffers.setdefault(target, []).append(line)
        buffered += len(line)
        if buffered > _SPILL_FLUSH_CHARS:
            _flush(buffers, folder)
            buffered = 0
    _flush(buffers, folder)
    return cursor


def _flush(buffers: dict[int, list[str]], folder: Path) -> None:
    for shard, lines in buffers.items():
        with open(folder / f"{shard:05d}.jsonl", "a", encoding="utf-8") as handle:
            handle.writelines(lines)
    buffers.clear()
