"""What scoring reads of a release: one split's questions, their evidence regions and their images' facts.

Only the columns the metrics need are read (pyarrow, per file); a column an older release lacks is all nulls.
Each evidence region is a compressed COCO RLE: its ``mask``, or its box rasterized at the image's size
(Visual Genome regions are boxes only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from reasonvqa import masks, sources
from reasonvqa.errors import UsageError

QUESTION_COLUMNS = {
    "question_id": pa.string(), "image_id": pa.string(), "image_source": pa.string(), "question": pa.string(),
    "answer": pa.string(), "choices": pa.list_(pa.string()), "kind": pa.string(), "task_type": pa.string(),
    "n_hop": pa.int8(), "domains": pa.list_(pa.string()), "evidence_region_ids": pa.list_(pa.string()),
    "is_hallucination": pa.bool_(), "program": pa.string(),
}
IMAGE_COLUMNS = ["image_id", "width", "height", "visual_domain"]
REGION_COLUMNS = ["region_id", "image_id", "mask", "x", "y", "w", "h"]


class ReleaseReadError(UsageError):
    """A release folder or one of its files that cannot be read (one line naming the file)."""


@dataclass
class ReleaseSplit:
    """One split's questions (``QUESTION_COLUMNS`` plus ``visual_domain``, ``width``, ``height`` of the image)
    and the compressed COCO RLE of every evidence region they name (region id -> RLE)."""

    release: Path
    split: str
    rows: pl.DataFrame
    regions: dict[str, dict]


def read_manifest(release: Path) -> dict:
    """The release's ``manifest.json`` (ReleaseReadError naming it when absent or not JSON)."""
    path = release / "manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReleaseReadError(f"{path}: not a readable release manifest ({type(exc).__name__}: {exc})") from None


def read_table(release: Path, folder: str, columns: dict[str, pa.DataType] | list[str]) -> pa.Table:
    """The named columns of every Parquet file in ``release/folder`` (a column a file lacks: nulls when its type
    is given, else left out)."""
    parts = sorted((release / folder).glob("*.parquet"))
    if not parts:
        raise ReleaseReadError(f"{release / folder}: no Parquet files")
    tables = []
    for part in parts:
        try:
            present = set(pq.read_schema(part).names)
            names = list(columns)
            table = pq.read_table(part, columns=[c for c in names if c in present])
        except (OSError, pa.ArrowException) as exc:
            raise ReleaseReadError(f"{part}: unreadable Parquet ({type(exc).__name__}: {exc})") from None
        if isinstance(columns, dict):
            table = pa.table({c: table[c].cast(t) if c in present else pa.nulls(table.num_rows, t)
                              for c, t in columns.items()})
        tables.append(table)
    return pa.concat_tables(tables, promote_options="permissive")


def read_questions(release: Path, split: str) -> pl.DataFrame:
    """The ``QUESTION_COLUMNS`` of one split."""
    return cast(pl.DataFrame, pl.from_arrow(read_table(release, split, QUESTION_COLUMNS)))


def image_facts(release: Path, manifest: dict) -> pl.DataFrame:
    """image_id, width, height, visual_domain of the release's images (empty when it has no images table)."""
    schema = {"image_id": pl.String, "width": pl.Int64, "height": pl.Int64, "visual_domain": pl.String}
    if "images" not in manifest.get("tables", []):
        return pl.DataFrame(schema=schema)
    table = cast(pl.DataFrame, pl.from_arrow(read_table(release, "images", IMAGE_COLUMNS)))
    return table.select(*(pl.col(c).cast(t) for c, t in schema.items()))


def read_release_split(release: Path, split: str) -> ReleaseSplit:
    """The questions of ``split`` with their images' facts, and their evidence regions as compressed RLEs."""
    manifest = read_manifest(release)
    if split not in manifest.get("splits", []) and not (release / split).is_dir():
        raise ReleaseReadError(f"{release}: no split {split!r} (splits: {', '.join(manifest.get('splits', []))})")
    rows = read_questions(release, split).join(image_facts(release, manifest), on="image_id", how="left")
    declared = {kind: sources.source_class(kind).visual_domain for kind in sources.kinds()}
    rows = rows.with_columns(visual_domain=pl.coalesce(
        pl.col("visual_domain"), pl.col("image_source").replace_strict(declared, default=None, return_dtype=pl.String),
        pl.col("image_source"), pl.lit("unknown")))
    return ReleaseSplit(release, split, rows, evidence_regions(release, manifest, rows))


def evidence_regions(release: Path, manifest: dict, rows: pl.DataFrame) -> dict[str, dict]:
    """region id -> compressed COCO RLE of every region the rows name as evidence."""
    wanted = rows.select(pl.col("evidence_region_ids").explode().drop_nulls().unique()).to_series()
    if not len(wanted) or "regions" not in manifest.get("tables", []):
        return {}
    table = cast(pl.DataFrame, pl.from_arrow(read_table(release, "regions", REGION_COLUMNS)))
    table = table.filter(pl.col("region_id").is_in(wanted.implode()))
    sizes = dict(zip(rows["image_id"].to_list(), zip(rows["height"].to_list(), rows["width"].to_list())))
    out: dict[str, dict] = {}
    for region_id, image_id, mask, x, y, w, h in table.iter_rows():
        if mask is not None:
            out[region_id] = masks.coco_checked(mask)
        elif None not in (x, y, w, h) and sizes.get(image_id, (None, None))[0] is not None:
            height, width = sizes[image_id]
            out[region_id] = masks.box_rles([[x, y, w, h]], int(height), int(width))[0]
    return out
