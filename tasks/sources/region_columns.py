"""Collect region rows column by column and turn them into one REGIONS table.

SA-1B images carry ~100 regions each; keeping them as per-row dicts would cost several
hundred bytes of Python objects per row. Columns of plain values become Arrow arrays once
per shard; the COCO RLE counts strings are kept as they came (compressed).
"""

from __future__ import annotations

import pyarrow as pa

from reasonvqa import schemas

_SIZE_TYPE = pa.list_(pa.int32())


class RegionColumns:
    """Append regions in output order; ``table()`` gives them as a ``schemas.REGIONS`` table."""

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in schemas.REGIONS.names if name != "mask"}
        self.mask_heights: list[int | None] = []
        self.mask_widths: list[int | None] = []
        self.mask_counts: list[str | None] = []

    def __len__(self) -> int:
        return len(self.columns["region_id"])

    def add(self, *, region_id: str, image_id: str, label: str | None, box: tuple[float, float, float, float],
            area: float, origin: str, mask: tuple[int, int, str] | None = None, score: float | None = None,
            predicted_iou: float | None = None, stability_score: float | None = None, prompt: str | None = None,
            attributes: list[str] | None = None, visibility: str | None = None,
            center_3d: list[float] | None = None, extra: str | None = None) -> None:
        """One region; ``mask`` is ``(height, width, counts)`` of a COCO compressed RLE."""
        x, y, w, h = box
        values = {"region_id": region_id, "image_id": image_id, "label": label, "x": x, "y": y, "w": w, "h": h,
                  "area": area, "score": score, "predicted_iou": predicted_iou, "stability_score": stability_score,
                  "origin": origin, "prompt": prompt, "attributes": attributes, "visibility": visibility,
                  "center_3d": center_3d, "extra": extra}
        for name, value in values.items():
            self.columns[name].append(value)
        height, width, counts = mask if mask is not None else (None, None, None)
        self.mask_heights.append(height)
        self.mask_widths.append(width)
        self.mask_counts.append(counts)

    def table(self) -> pa.Table:
        """The collected regions as a REGIONS table, in the order they were added."""
        arrays = []
        for field in schemas.REGIONS:
            if field.name == "mask":
                arrays.append(self._masks())
            else:
                arrays.append(pa.array(self.columns[field.name], type=field.type))
        return pa.Table.from_arrays(arrays, schema=schemas.REGIONS)

    def _masks(self) -> pa.Array:
        has_mask = [c is not None for c in self.mask_counts]
        sizes = pa.array([[h, w] if c is not None else None
                          for h, w, c in zip(self.mask_heights, self.mask_widths, self.mask_counts)], type=_SIZE_TYPE)
        counts = pa.array(self.mask_counts, type=pa.string())
        mask_type = schemas.REGIONS.field("mask").type
        return pa.StructArray.from_arrays([sizes, counts], fields=list(mask_type),
                                          mask=pa.array([not m for m in has_mask], type=pa.bool_()))
