"""SA-1B source: released tar shards of ``sa_<id>.jpg`` + ``sa_<id>.json``, read without extracting.

Inputs: a folder of ``sa_NNNNNN.tar`` shards (or one tar file), optionally the links file users
download them with (``file_name<TAB>cdn_link``), optionally a domain table (``image_id<TAB>indoor``
or ``outdoor``) that tags images; untagged images get the configured ``domain``.

Per image ``sa1b:<id>``: width and height from the JSON, checked against the JPEG's frame header
(read by Pillow, which reads the header only). Per annotation a region ``sa1b:<id>/g<annotation id>``: box XYWH,
the COCO RLE mask kept compressed, area, predicted_iou, stability_score; ``point_coords``,
``crop_box`` and any other keys go to ``extra``. SA-1B has no class labels, so no objects.

Accounting unit (``rows_in``): each image (its jpg + json pair) and each annotation of an image
that was kept; each tar member that was refused (unsafe, unexpected, orphan, duplicate) and a
truncated or corrupt tail count once. A refused image counts once (its annotations are in the
reject's record count, not read).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from itertools import chain
from typing import IO, Any, ClassVar, Iterator, Literal, NamedTuple, Sequence, TypeGuard

import numpy as np
import orjson
from PIL import JpegImagePlugin
from pydantic import Field

from reasonvqa import masks, schemas
from reasonvqa.gc_pause import gc_paused
from reasonvqa.sources import ImageUnavailable, Source, SourceConfig
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.sources.region_columns import RegionColumns
from reasonvqa.tasks.sources.sa1b_links import read_links
from reasonvqa.tasks.sources.tar_stream import Member, Problem, walk

STAGE = "sources_sa1b"
ORIGIN = "annotation:sa1b"
LICENSE = "SA-1B Dataset Research License (research use)"
MEMBER_NAME = re.compile(r"sa_(\d+)\.(jpg|json)")
_KNOWN_KEYS = {"id", "bbox", "area", "segmentation", "predicted_iou", "stability_score"}
_SAM_KEYS = _KNOWN_KEYS | {"point_coords", "crop_box"}  # every annotation of the released files has these


class Sa1bConfig(SourceConfig):
    """SA-1B options: where the shards are, the links file, and the indoor/outdoor rule."""

    kind: Literal["sa1b"] = "sa1b"
    links_file: str | None = Field(default=None, description="Links TSV (file_name<TAB>cdn_link) inside path; "
                                   "when set, only the tars it lists are read and absent ones are reported.")
    domain: Literal["indoor", "outdoor", "indoor/outdoor"] = Field(
        default="indoor/outdoor", description="Visual domain of images the domain table does not tag.")
    domain_table: Path | None = Field(default=None, description="TSV image_id<TAB>indoor|outdoor (relative to path).")
    max_regions_per_shard: int = Field(default=50_000, ge=1, description="Cut a shard early at this many regions.")
    verify_area: bool = Field(default=True, description="Check each annotation's area against its RLE's pixel count.")


class Sa1bSource(Source):
    """SA-1B (Segment Anything 1 Billion) tar shards."""

    kind: ClassVar[str] = "sa1b"
    config_model: ClassVar[type[SourceConfig]] = Sa1bConfig
    visual_domain: ClassVar[str] = "indoor/outdoor"
    unlabeled_regions: ClassVar[bool] = True
    license: ClassVar[str] = LICENSE
    description: ClassVar[str] = "SA-1B tar shards (sa_NNNNNN.tar): images with ~100 class-free SAM masks each"
    redistribution: ClassVar[str] = "the SA-1B Dataset Research License does not allow redistributing its images"

    def image_bytes(self, config: SourceConfig, file_path: str) -> bytes:
        """The ``sa_<id>.jpg`` member of the tar that ``file_path`` (``sa_NNNNNN.tar/sa_<id>.jpg``) names, streamed."""
        config = self.typed(config)
        tar_name, _, member = (file_path or "").partition("/")
        if not MEMBER_NAME.fullmatch(member) or "/" in tar_name or not tar_name.endswith(".tar"):
            raise ImageUnavailable("no_file_path", f"not an SA-1B tar member path: {file_path!r}")
        tar = _resolve(config, Path(tar_name))
        if not tar.is_file():
            raise ImageUnavailable("missing_file", f"{tar_name} is not in the source folder")
        for item in walk(tar):
            if isinstance(item, Member) and item.name == member:
                return item.stream.read()
            if isinstance(item, Problem) and item.reason in ("tar_unreadable", "tar_truncated", "tar_corrupt"):
                raise ImageUnavailable("corrupt", f"{tar_name}: {item.reason} at byte {item.offset} before {member}")
        raise ImageUnavailable("missing_file", f"{member} not in {tar_name}")

    def check(self, config: SourceConfig) -> None:
        config = self.typed(config)
        if not config.path.exists():
            raise FileNotFoundError(f"SA-1B folder not found: {config.path}")
        if config.links_file is not None:
            links = _resolve(config, Path(config.links_file))
            if not links.is_file():
                raise FileNotFoundError(f"SA-1B links file not found: {links}")
            read_links(links)
        if config.domain_table is not None:
            read_domain_table(_resolve(config, config.domain_table))
        if not self.plan(config, 1):
            raise FileNotFoundError(f"no SA-1B tar shards (sa_NNNNNN.tar) in {config.path}")

    def plan(self, config: SourceConfig, shard_size: int) -> list[str]:
        """The tar shards to read, sorted by name (one unit each)."""
        config = self.typed(config)
        tars = [config.path] if config.path.is_file() else sorted(p for p in config.path.glob("sa_*.tar") if p.is_file())
        if config.links_file is not None:
            listed = read_links(_resolve(config, Path(config.links_file)))
            tars = [p for p in tars if p.name in listed]
        return [str(p) for p in tars]

    def read(self, config: SourceConfig, unit: str, shard_size: int) -> Iterator[StageResult]:
        config = self.typed(config)
        domains = read_domain_table(_resolve(config, config.domain_table)) if config.domain_table else {}
        links = read_links(_resolve(config, Path(config.links_file))) if config.links_file else {}
        reader = _TarReader(Path(unit), config, domains, links.get(Path(unit).name), shard_size)
        with gc_paused():  # ~100 annotations per image: the cyclic GC would keep rescanning the shard's rows
            yield from reader.shards()


def missing_tars(config: Sa1bConfig) -> list[str]:
    """Tars the links file lists that are not in the folder (not downloaded yet)."""
    if config.links_file is None:
        return []
    folder = _resolve(config, Path("."))
    return sorted(name for name in read_links(_resolve(config, Path(config.links_file))) if not (folder / name).is_file())


def read_domain_table(path: Path) -> dict[int, str]:
    """SA-1B image id -> "indoor" / "outdoor" from a two-column TSV (an optional header is skipped)."""
    table: dict[int, str] = {}
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            fields = line.rstrip("\r\n").split("\t")
            if fields == [""] or (line_no == 1 and fields[0] == "image_id"):
                continue
            if len(fields) != 2 or not fields[0].isdigit() or fields[1] not in ("indoor", "outdoor"):
                raise ValueError(f"{path.name}:{line_no}: expected '<image id><TAB>indoor|outdoor', got {line.strip()!r}")
            table[int(fields[0])] = fields[1]
    return table


def parse_json(data: bytes | memoryview) -> Any:
    """``json.loads(data)``, through orjson (3-4x faster on SA-1B files) when it accepts the bytes.

    orjson refuses some inputs the standard library reads (NaN and Infinity literals, UTF-16/32,
    integers beyond 64 bits); those are read by ``json.loads``, so the result is always its result.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(bytes(data))


def jpeg_size(stream: IO[bytes]) -> tuple[int, int]:
    """``(width, height)`` from a JPEG's frame header, read by Pillow's JPEG reader (header bytes only, no
    pixels, no decompression-bomb refusal: the size is only recorded). ValueError names what is wrong."""
    try:
        return JpegImagePlugin.JpegImageFile(stream).size
    except (SyntaxError, OSError, ValueError) as error:  # Pillow says "not a JPEG file", "Truncated File Read", ...
        raise ValueError(f"not a JPEG Pillow can read: {error}") from None


def _resolve(config: Sa1bConfig, path: Path) -> Path:
    """``path`` relative to the shard folder (the folder of ``config.path`` when that is one tar)."""
    folder = config.path.parent if config.path.is_file() else config.path
    return path if path.is_absolute() else folder / path


@dataclass
class _Pending:
    """The half of an image pair seen so far."""

    jpeg_size: tuple[int, int] | None = None
    jpeg_offset: int | None = None
    json_bytes: bytes | None = None
    json_offset: int | None = None
    refused: tuple[str, str] | None = None  # (reason, detail) when the JPEG header was unreadable


@dataclass
class _Shard:
    index: int
    rejects: Rejects
    images: list[dict] = field(default_factory=list)
    regions: RegionColumns = field(default_factory=RegionColumns)
    rows_in: int = 0


class _Ready(NamedTuple):
    """An image whose jpg and json have both been seen."""

    stem: str
    half: _Pending


class _Refused(NamedTuple):
    """A tar member refused by name (unexpected, duplicate)."""

    reason: str
    where: str
    detail: str


class _TarReader:
    """Walks one tar and cuts its images into shards."""

    def __init__(self, tar: Path, config: Sa1bConfig, domains: dict[int, str], tar_url: str | None,
                 shard_size: int) -> None:
        self.tar, self.config, self.domains, self.tar_url = tar, config, domains, tar_url
        self.tar_name = tar.name  # Path.name is not a stored attribute: ~1 us per image
        self.shard_size = shard_size
        self.pending: dict[str, _Pending] = {}
        self.done: set[str] = set()  # stems whose pair was complete (a later member with the stem is a duplicate)
        self.images_read = 0

    def shards(self) -> Iterator[StageResult]:
        shard = self._new_shard(0)
        limit = self.config.max_images
        for item in walk(self.tar):
            if limit is not None and self.images_read >= limit:
                break
            if isinstance(item, Problem):
                shard.rows_in += 1
                shard.rejects.add(item.reason, self._where(item), item.detail)
                continue
            event = self._take(item)
            if event is None:
                continue
            if isinstance(event, _Refused):
                shard.rows_in += 1
                shard.rejects.add(*event)
            else:
                self._image(event.stem, event.half, shard)
            if len(shard.images) >= self.shard_size or len(shard.regions) >= self.config.max_regions_per_shard:
                yield self._result(shard)
                shard = self._new_shard(shard.index + 1)
        for stem, half in sorted(self.pending.items()):
            shard.rows_in += 1
            if half.json_bytes is not None:
                shard.rejects.add("sa1b_jpeg_missing", f"{self.tar_name}:sa_{stem}.json@{half.json_offset}", "")
            else:
                shard.rejects.add("sa1b_json_missing", f"{self.tar_name}:sa_{stem}.jpg@{half.jpeg_offset}", "")
        if shard.rows_in or shard.index == 0:
            yield self._result(shard)

    def _new_shard(self, index: int) -> _Shard:
        return _Shard(index, Rejects(STAGE, index))

    def _take(self, member: Member) -> _Ready | _Refused | None:
        match = MEMBER_NAME.fullmatch(member.name)
        if match is None:
            return _Refused("tar_member_unexpected", self._where(member), f"{member.size} bytes")
        stem, ext = match.groups()
        half = self.pending.get(stem) or _Pending()
        if stem in self.done or (ext == "jpg" and half.jpeg_offset is not None) or (
                ext == "json" and half.json_offset is not None):
            return _Refused("tar_member_duplicate", self._where(member), "")
        self.pending[stem] = half
        if ext == "jpg":
            half.jpeg_offset = member.offset
            try:
                half.jpeg_size = jpeg_size(member.stream)
            except ValueError as error:
                half.refused = ("sa1b_jpeg_invalid", str(error))  # refused once its JSON arrives too
        else:
            half.json_offset = member.offset
            half.json_bytes = member.stream.read()
        if half.jpeg_offset is not None and half.json_offset is not None:
            del self.pending[stem]
            self.done.add(stem)
            self.images_read += 1
            return _Ready(stem, half)
        return None

    def _where(self, member: Member | Problem) -> str:
        """Where a member (or a problem of the walk) sits: ``<tar>:<name>@<header offset>``."""
        return f"{self.tar_name}:{member.name}@{member.offset}"

    def _image(self, stem: str, half: _Pending, shard: _Shard) -> None:
        where = f"{self.tar_name}:sa_{stem}.json"
        shard.rows_in += 1
        if half.refused is not None:
            shard.rejects.add(half.refused[0], f"{self.tar_name}:sa_{stem}.jpg@{half.jpeg_offset}", half.refused[1])
            return
        try:
            doc = parse_json(half.json_bytes or b"")
            image, annotations = _image_fields(doc, stem)
        except (ValueError, TypeError, KeyError) as error:
            shard.rejects.add("sa1b_json_invalid", where, str(error))
            return
        width, height = image["width"], image["height"]
        if (width, height) != half.jpeg_size:
            jw, jh = half.jpeg_size or (0, 0)
            shard.rejects.add("sa1b_size_mismatch", where,
                              f"JSON says {width}x{height}, the JPEG header {jw}x{jh}; {len(annotations)} annotations not read")
            return
        image_id = f"sa1b:{image['image_id']}"
        shard.images.append({
            "image_id": image_id, "source": "sa1b", "source_image_id": str(image["image_id"]),
            "width": width, "height": height, "file_path": f"{self.tar_name}/{image['file_name']}",
            "visual_domain": self.domains.get(image["image_id"], self.config.domain), "license": LICENSE,
        })
        shard.rows_in += len(annotations)
        self._regions(image_id, width, height, annotations, where, shard)

    def _regions(self, image_id: str, width: int, height: int, annotations: list, where: str, shard: _Shard) -> None:
        """Annotations -> region columns. Clean images take a columnar path; others are checked one by one."""
        if not annotations:
            return
        columns = _clean_columns(annotations, width, height)
        clean = columns is not None
        if columns is None:
            kept = self._checked_one_by_one(annotations, width, height, where, shard)
            if not kept:
                return
            indices, anns = zip(*kept)
            columns = _Columns([ann["segmentation"]["counts"] for ann in anns],
                               np.array([ann["area"] for ann in anns], dtype=np.float64),
                               np.array([ann["bbox"] for ann in anns], dtype=np.float64),
                               [ann.get("predicted_iou") for ann in anns], [ann.get("stability_score") for ann in anns])
        else:
            indices, anns = range(len(annotations)), annotations
        counts, areas, boxes = columns.counts, columns.areas, columns.boxes
        if self.config.verify_area:
            covered = masks.coco_areas([{"size": [height, width], "counts": c} for c in counts])  # pycocotools encodes str counts itself
            wrong = np.flatnonzero(covered != areas)
            if len(wrong):
                for i in wrong.tolist():
                    shard.rejects.add("sa1b_area_mismatch", f"{where}#annotations[{indices[i]}]",
                                      f"area {anns[i]['area']} but the RLE covers {int(covered[i])} px")
                keep = set(range(len(anns))) - set(wrong.tolist())
                anns = [a for i, a in enumerate(anns) if i in keep]
                counts = [c for i, c in enumerate(counts) if i in keep]
                areas, boxes = np.delete(areas, wrong), np.delete(boxes, wrong, axis=0)
                columns = _Columns(counts, areas, boxes, [a.get("predicted_iou") for a in anns],
                                   [a.get("stability_score") for a in anns])
        if not anns:
            return
        n = len(anns)
        if _has_sam_keys_only(anns):  # the released layout: no dict per row for extra
            extra = {"extra_fields": {"crop_box": [a["crop_box"] for a in anns],
                                      "point_coords": [a["point_coords"] for a in anns]}}
        else:
            extra = {"extra": [_extra(ann) for ann in anns]}
        shard.regions.extend(
            n, region_id=[f"{image_id}/g{ann['id']}" for ann in anns], image_id=image_id,
            x=boxes[:, 0], y=boxes[:, 1], w=boxes[:, 2], h=boxes[:, 3],
            masks=([height] * n, [width] * n, counts), area=areas, origin=ORIGIN,
            predicted_iou=_finite_column(columns.predicted_iou, clean),
            stability_score=_finite_column(columns.stability_score, clean),
            **extra,
        )

    @staticmethod
    def _checked_one_by_one(annotations: list, width: int, height: int, where: str,
                            shard: _Shard) -> list[tuple[int, dict]]:
        seen: set[int] = set()
        kept: list[tuple[int, dict]] = []
        for index, ann in enumerate(annotations):
            reason = _annotation_problem(ann, width, height, seen)
            if reason is not None:
                shard.rejects.add(reason, f"{where}#annotations[{index}]", _short(ann))
                continue
            seen.add(ann["id"])
            kept.append((index, ann))
        return kept

    def _result(self, shard: _Shard) -> StageResult:
        return StageResult(
            outputs={"images": schemas.from_rows(shard.images, schemas.IMAGES), "regions": shard.regions.table()},
            rejects=shard.rejects, rows_in=shard.rows_in,
            extra={"source": "sa1b", "tar": self.tar_name, "tar_url": self.tar_url},
        )


def _image_fields(doc: Any, stem: str) -> tuple[dict, list]:
    """The ``image`` block and ``annotations`` list of one JSON, checked against the member name."""
    if not isinstance(doc, dict) or not isinstance(doc.get("image"), dict):
        raise ValueError("no 'image' object")
    image = doc["image"]
    for key in ("image_id", "width", "height"):
        if not isinstance(image.get(key), int) or isinstance(image.get(key), bool) or image[key] <= 0:
            raise ValueError(f"image.{key} is not a positive integer: {image.get(key)!r}")
    if image["image_id"] != int(stem):
        raise ValueError(f"image.image_id {image['image_id']} does not match member sa_{stem}")
    name = image.get("file_name", f"sa_{stem}.jpg")
    if name != f"sa_{stem}.jpg":
        raise ValueError(f"image.file_name {name!r} does not match member sa_{stem}.jpg")
    image = {**image, "file_name": name}
    annotations = doc.get("annotations", [])
    if not isinstance(annotations, list):
        raise ValueError("'annotations' is not a list")
    return image, annotations


class _Columns(NamedTuple):
    """The values of an image's annotations that become region columns."""

    counts: list[str]
    areas: np.ndarray
    boxes: np.ndarray  # (n, 4) XYWH
    predicted_iou: list
    stability_score: list


def _clean_columns(annotations: list, width: int, height: int) -> _Columns | None:
    """The region columns of all annotations when every one is valid (checked column-wise), else None.

    Gives the same verdict as ``_annotation_problem`` on each, without a Python call per annotation
    (type checks are ``set(map(type, column))``, value checks numpy). A bbox passes when it has 4
    numbers, as the dtype of ``np.array(bboxes)`` would say: ints, floats, and bools mixed with them.
    """
    try:
        ids = [ann["id"] for ann in annotations]
        bboxes = [ann["bbox"] for ann in annotations]
        areas = [ann["area"] for ann in annotations]
        segmentations = [ann["segmentation"] for ann in annotations]
        sizes = [seg["size"] for seg in segmentations]
        counts = [seg["counts"] for seg in segmentations]
        predicted = [ann.get("predicted_iou") for ann in annotations]
        stability = [ann.get("stability_score") for ann in annotations]
    except (KeyError, TypeError):
        return None
    n = len(annotations)
    if sizes.count([height, width]) != n or not set(map(type, counts)) <= {str} or not all(counts):
        return None
    if not set(map(type, ids)) <= {int} or len(set(ids)) != n:
        return None
    if not set(map(type, bboxes)) <= {list} or not set(map(len, bboxes)) <= {4}:
        return None
    flat_boxes = list(chain.from_iterable(bboxes))
    box_types = set(map(type, flat_boxes))
    if not box_types <= _BOX_TYPES or box_types == {bool} or not set(map(type, areas)) <= _NUMBER_TYPES:
        return None
    if not set(map(type, predicted)) <= _SCORE_TYPES or not set(map(type, stability)) <= _SCORE_TYPES:
        return None
    boxes = np.array(flat_boxes, dtype=np.float64).reshape(n, 4)
    area = np.array(areas, dtype=np.float64)
    if not (np.isfinite(boxes).all() and (boxes[:, 2:] > 0).all() and np.isfinite(area).all() and (area > 0).all()):
        return None
    return _Columns(counts, area, boxes, predicted, stability)


_NUMBER_TYPES = {int, float}
_BOX_TYPES = {int, float, bool}
_SCORE_TYPES = {int, float, type(None)}


def _has_sam_keys_only(annotations: Sequence[dict]) -> bool:
    """True when every annotation has exactly the released keys (id, bbox, ... point_coords, crop_box).

    Called on annotations that passed the checks, so id, bbox, area and segmentation are present.
    """
    return set(map(len, annotations)) == {len(_SAM_KEYS)} and all(
        ["point_coords" in a and "crop_box" in a and "predicted_iou" in a and "stability_score" in a
         for a in annotations])


def _finite_column(values: list, numbers_or_none: bool) -> np.ndarray:
    """Numbers as floats; anything else (None, text, NaN, infinities) as NaN, which Arrow stores as null.

    ``numbers_or_none``: the values are known to be numbers or None (no per-value check needed).
    """
    if not numbers_or_none:
        values = [v if _is_number(v) else None for v in values]
    column = np.array(values, dtype=np.float64)  # None -> NaN
    column[~np.isfinite(column)] = math.nan
    return column


def _extra(ann: dict) -> dict | None:
    """The annotation's other keys (point_coords, crop_box, ...); RegionColumns writes them as JSON."""
    return {k: v for k, v in ann.items() if k not in _KNOWN_KEYS} or None


def _annotation_problem(ann: Any, width: int, height: int, seen: set[int]) -> str | None:
    """Why one annotation cannot become a region, or None."""
    if not isinstance(ann, dict):
        return "sa1b_annotation_invalid"
    ann_id = ann.get("id")
    if not isinstance(ann_id, int) or isinstance(ann_id, bool):
        return "sa1b_annotation_invalid"
    if ann_id in seen:
        return "sa1b_annotation_duplicate"
    box = ann.get("bbox")
    if (not isinstance(box, list) or len(box) != 4 or not all(_is_number(v) and math.isfinite(v) for v in box)
            or box[2] <= 0 or box[3] <= 0):
        return "sa1b_bbox_invalid"
    seg = ann.get("segmentation")
    if not isinstance(seg, dict) or not isinstance(seg.get("counts"), str) or not seg["counts"]:
        return "sa1b_rle_invalid"
    if seg.get("size") != [height, width]:
        return "sa1b_rle_size_mismatch"
    area = ann.get("area")
    if not _is_number(area) or not math.isfinite(area) or area <= 0:
        return "sa1b_area_invalid"
    return None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(ann: Any) -> dict | str:
    """The rejected annotation without its (long) RLE counts, for the reject record."""
    if not isinstance(ann, dict):
        return repr(ann)[:200]
    out = {k: v for k, v in ann.items() if k != "segmentation"}
    seg = ann.get("segmentation")
    if isinstance(seg, dict):
        out["segmentation"] = {"size": seg.get("size"), "counts_chars": len(str(seg.get("counts", "")))}
    return out
