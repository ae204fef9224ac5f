"""Image groups for the group-disjoint split: images of one landmark, drive or episode stay in one split.

A source that knows which images belong together records it in ``IMAGES.group_id`` (GLDv2: the landmark id,
nuScenes: the scene name, DROID: the episode uuid; tasks/sources). Images of one group share their facts or
their scene, so a group in both train and test would let train answer test. The split's unit is then the
group: ``<source>:group:<group_id>`` (group ids are only unique within a source), or the image itself where the
source has no group (Visual Genome, SA-1B) or the images table has no row for it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

GROUPS = pa.schema([("image_id", pa.string()), ("group", pa.string()), ("visual_domain", pa.string())])
GROUP_COLUMNS = ["image_id", "source", "group_id", "visual_domain"]


def image_groups(images: pa.Table) -> pa.Table:
    """(image_id, group) of every images row (IMAGES columns image_id, source, group_id; source from the image
    id's prefix when the column is missing): ``<source>:group:<group_id>``, or the image id when there is no group."""
    if images.num_rows == 0 or "image_id" not in images.column_names:
        return GROUPS.empty_table()
    image_id = images["image_id"].cast(pa.string())
    if "source" in images.column_names:
        source = pc.coalesce(images["source"].cast(pa.string()), source_of(image_id))
    else:
        source = source_of(image_id)
    # the visual domain the source declares (hallucination_share balances per domain); else the source's name
    domain = (pc.coalesce(images["visual_domain"].cast(pa.string()), source) if "visual_domain" in images.column_names
              else source)
    if "group_id" not in images.column_names:
        return pa.table({"image_id": image_id, "group": image_id, "visual_domain": domain}, schema=GROUPS)
    # a group's name holds its source and a marker no image id carries, so it never equals an image id
    group = pc.binary_join_element_wise(source, pa.scalar("group"), images["group_id"].cast(pa.string()), ":")
    return pa.table({"image_id": image_id, "group": pc.coalesce(group, image_id), "visual_domain": domain},
                    schema=GROUPS)


def source_of(image_ids: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The source of each image id: its prefix before the first ``:`` (ids are ``<source>:<native id>``)."""
    return pc.list_element(pc.split_pattern(pc.fill_null(image_ids, ""), ":", max_splits=1), 0)


def domains_of(image_ids: pa.Array, groups: pa.Table | None) -> pa.Array:
    """The visual domain of each image id (``groups``' visual_domain; its source where ``groups`` has no row)."""
    image_ids = image_ids.combine_chunks() if isinstance(image_ids, pa.ChunkedArray) else image_ids
    source = source_of(image_ids)
    if groups is None or groups.num_rows == 0 or "visual_domain" not in groups.column_names:
        return source
    at = pc.index_in(image_ids, value_set=groups["image_id"].combine_chunks())
    return pc.coalesce(groups["visual_domain"].combine_chunks().take(at), source)


def groups_of(images: object) -> pa.Table | None:
    """The groups of a release's images table as a build or re-split holds it: a plain table, ``EmbeddedImages``
    (``.images``) or ``ReleaseImages`` (``.parts``); None when there is none."""
    if images is None:
        return None
    if isinstance(images, pa.Table):
        return image_groups(images)
    table = getattr(images, "images", None)
    if isinstance(table, pa.Table):
        return image_groups(table)
    parts = getattr(images, "parts", None)
    return groups_of_files(parts) if parts is not None else None


def groups_of_files(paths: list[Path]) -> pa.Table:
    """The groups of images tables in Parquet ``paths`` (only their image_id, source and group_id are read)."""
    tables = [pq.read_table(p, columns=[c for c in GROUP_COLUMNS if c in pq.read_schema(p).names]) for p in paths]
    return image_groups(pa.concat_tables(tables, promote_options="default")) if tables else GROUPS.empty_table()


def group_names(image_ids: pa.Array | pa.ChunkedArray, groups: pa.Table) -> pa.Array:
    """The group of each image id (the id itself where ``groups`` has no row for it)."""
    image_ids = image_ids.combine_chunks() if isinstance(image_ids, pa.ChunkedArray) else image_ids
    if groups.num_rows == 0:
        return image_ids
    at = pc.index_in(image_ids, value_set=groups["image_id"].combine_chunks())
    return pc.coalesce(groups["group"].combine_chunks().take(at), image_ids)


def units_of(image_ids: pa.Array, groups: pa.Table | None) -> tuple[np.ndarray, pa.Array]:
    """Per image of ``image_ids`` (distinct, in image_id order): its split unit, and each unit's group name.

    Units are numbered by their first image, so without groups (or with one image per group) unit i is image i
    and the split is the image split. An image without a row in ``groups`` is a unit of its own."""
    n = len(image_ids)
    if groups is None or groups.num_rows == 0 or n == 0:
        return np.arange(n, dtype=np.int64), image_ids
    encoded = pc.dictionary_encode(group_names(image_ids, groups))
    code = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    _, first = np.unique(code, return_index=True)  # every code occurs: one first image per dictionary entry
    order = np.argsort(first, kind="stable")  # units by their first image
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[code], encoded.dictionary.take(pa.array(order))
