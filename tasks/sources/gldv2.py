"""Google Landmarks v2 source: stream train.csv (4.1 M rows) into shards of images and objects.

Inputs in one folder: ``train.csv`` (``id,url,landmark_id``; the Kaggle 2020/2021
releases drop ``url``), or else ``index.csv`` / ``test.csv`` (``id,url``, no landmark);
``train_label_to_category.csv`` (required when rows carry landmark ids) and the
optional ``train_clean.csv`` (see tasks/sources/gldv2_side.py).

Per row: an image ``gldv2:<id>`` (``group_id`` = landmark id, ``is_clean`` from
train_clean.csv or null without it, width/height null: unknown without the file,
``file_path`` ``<split>/a/b/c/abc....jpg``) and, when the row has a landmark, one
whole-image object ``gldv2:<id>/o0`` (box null) labelled with the Commons category name.

Accounting unit (``rows_in``): one data row of the split file, plus, in shard 0, each
rejected row or image id of the side files. Kept rows count once (their object is not
counted again: ``rows_out`` = images).
"""

from __future__ import annotations

import re
from contextlib import closing
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.gc_pause import gc_paused_while
from reasonvqa.sources import Source, SourceConfig, require_folder
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.sources.columns import ColumnBuffer
from reasonvqa.tasks.sources.gldv2_side import (
    CATEGORIES, CLEAN, SideTables, csv_rows, has_invalid_utf8, image_key, read_side_tables, require_columns,
)
from reasonvqa.tasks.sources.normalize import as_int_id
from reasonvqa.tasks.sources.seen_ids import SeenIds

STAGE = "sources_gldv2"
ORIGIN = "annotation:gldv2"
SPLIT_FILES = ("train.csv", "index.csv", "test.csv")
_HTTP_URL = re.compile(r"https?://[^\s/?#@]+(?:[/?#]\S*)?", re.IGNORECASE)


def locate_split(folder: Path) -> Path:
    """The image list to read: train.csv, else index.csv, else test.csv."""
    for name in SPLIT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"GLDv2 image list not found: {folder / SPLIT_FILES[0]} (nor index.csv, test.csv)")


# the columns each image list's rows need: train.csv rows carry their landmark (index/test lists have none)
REQUIRED_COLUMNS = {"train.csv": ("id", "landmark_id"), "index.csv": ("id",), "test.csv": ("id",)}


def split_header(folder: Path) -> tuple[Path, list[str]]:
    """The image list to read and its lower-cased header; CsvColumnError (naming file and column) when
    the header lacks a column that list's rows need."""
    split = locate_split(folder)
    with closing(csv_rows(split)) as rows:
        header = next(rows)
    require_columns(split, header, REQUIRED_COLUMNS[split.name])
    return split, header


def is_http_url(text: str) -> bool:
    """True for an absolute http(s) URL with a host and no whitespace."""
    return _HTTP_URL.fullmatch(text.strip()) is not None


class Gldv2Source(Source):
    """Google Landmarks v2 folder: one work unit (the image list is one CSV stream)."""

    kind = "gldv2"
    visual_domain = "landmarks"
    # the annotations are CC BY 4.0 (Google); each image keeps its own license, listed in
    # train_attribution.csv (train images: CC BY family without NoDerivs)
    license = "images: per image (train_attribution.csv); annotations: CC BY 4.0"
    description = "Google Landmarks v2: train.csv (or index.csv, test.csv), train_label_to_category.csv, train_clean.csv"
    redistribution = ("each GLDv2 image has its own license and attribution (train_attribution.csv), which the "
                      "release does not carry: fetch by URL")

    def check(self, config: SourceConfig) -> None:
        folder = require_folder(config)
        _, header = split_header(folder)
        if "landmark_id" in header and not (folder / CATEGORIES).is_file():
            raise FileNotFoundError(f"GLDv2 landmark categories not found: {folder / CATEGORIES}")

    def read(self, config: SourceConfig, unit: Any, shard_size: int) -> Iterator[StageResult]:
        """Shards of ``shard_size`` data rows of the image list; ``config.max_images`` reads only
        the first N data rows."""
        folder = Path(config.path)
        split, header = split_header(folder)
        side = read_side_tables(folder, need_categories="landmark_id" in header)
        extra = {
            "source": self.kind,
            "split_file": split.name,
            "missing_files": sorted(n for n in (CATEGORIES, CLEAN) if not (folder / n).is_file()),
        }
        return gc_paused_while(_shards(split, side, shard_size, config.max_images, extra))


def _shards(split: Path, side: SideTables, shard_size: int, max_images: int | None, extra: dict) -> Iterator[StageResult]:
    seen = SeenIds()
    with closing(csv_rows(split)) as rows:
        header = next(rows)
        builder = _ShardBuilder(split, header, side, seen, extra)
        chunk: list[tuple[int, list[str]]] = []
        shard = read = 0
        for line, row in rows:
            if max_images is not None and read >= max_images:
                break
            chunk.append((line, row))
            read += 1
            if len(chunk) == shard_size:
                yield builder.build(shard, chunk)
                shard, chunk = shard + 1, []
        if chunk or shard == 0:
            yield builder.build(shard, chunk)


class _ShardBuilder:
    """Turns chunks of split-file rows into shard results (duplicate ids checked across shards)."""

    def __init__(self, split: Path, header: list[str], side: SideTables, seen: SeenIds, extra: dict) -> None:
        self.split, self.header, self.side, self.seen, self.extra = split, header, side, seen, extra
        self.stem = split.stem
        self.columns = {name: header.index(name) for name in ("id", "url", "landmark_id") if name in header}

    def build(self, shard: int, chunk: list[tuple[int, list[str]]]) -> StageResult:
        rejects = Rejects(STAGE, shard)
        rows_in = len(chunk)
        if shard == 0:
            rows_in += len(self.side.rejects)
            for reason, source, record in self.side.rejects:
                rejects.add(reason, source, record)
        valid = [v for v in (self._check(line, row, rejects) for line, row in chunk) if v is not None]
        ids = np.array([int(v[1], 16) for v in valid], dtype=np.uint64)
        repeated = self.seen.add_batch(ids)
        clean = self.side.is_clean(ids)
        images = ColumnBuffer(schemas.IMAGES, ("image_id", "source_image_id", "url", "file_path", "group_id", "is_clean"),
                              [("_key", pa.string())], {"source": "gldv2"})
        objects = ColumnBuffer(schemas.OBJECTS, ("object_id", "image_id", "label", "names", "commons_category"),
                               [("_key", pa.string())], {"origin": ORIGIN})
        for i, (source, key, url, landmark, row) in enumerate(valid):
            if repeated[i]:
                rejects.add("duplicate_image_id", source, row)
                continue
            image_id = f"gldv2:{key}"
            group = None if landmark is None else str(landmark)
            images.add((key, image_id, key, url, f"{self.stem}/{key[0]}/{key[1]}/{key[2]}/{key}.jpg", group,
                        None if clean is None else bool(clean[i])))
            if landmark is not None:
                category = self.side.categories[landmark]
                objects.add((key, f"{image_id}/o0", image_id, category, [category], category))
        # empty relations/attributes keep every source's stage folder alike
        outputs = {"images": images.table(), "objects": objects.table(),
                   "relations": schemas.empty(schemas.RELATIONS), "attributes": schemas.empty(schemas.ATTRIBUTES)}
        rows_out = outputs["images"].num_rows
        extra = {**self.extra, "tables": {k: t.num_rows for k, t in outputs.items()}}
        return StageResult(outputs=outputs, rejects=rejects, rows_in=rows_in, rows_out=rows_out, extra=extra)

    def _check(self, line: int, row: list[str], rejects: Rejects) -> tuple | None:
        """(source, image key, url, landmark id, row) of a well-formed row; otherwise one reject."""
        source = f"{self.split.name}:{line}"
        reason = None
        key = url = landmark = None
        if has_invalid_utf8(row):
            reason = "csv_invalid_utf8"
        elif len(row) != len(self.header):
            reason = "csv_row_malformed"
        elif (key := image_key(row[self.columns["id"]])) is None:
            reason = "image_id_malformed"
        elif "url" in self.columns and not is_http_url(url := row[self.columns["url"]].strip()):
            reason = "url_malformed"
        elif "landmark_id" in self.columns:
            landmark = as_int_id(row[self.columns["landmark_id"]])
            if landmark is None:
                reason = "landmark_id_not_numeric"
            elif landmark not in self.side.categories:
                reason = "landmark_without_category"
        if reason is not None:
            rejects.add(reason, source, row)
            return None
        return source, key, url, landmark, row
