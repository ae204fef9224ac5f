"""Mask codecs between the record model's COCO RLE and the annotation tools' own encodings.

COCO RLE (``{"size": [H, W], "counts": str}``) through pycocotools; Label Studio brush RLE
(bit-packed runs over the flattened RGBA buffer, the mask in the alpha channel) through
label-studio-sdk's converter; CVAT for images 1.1 ``rle`` (runs over the mask's own box,
row-major, starting with a background run).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pycocotools import mask as coco_mask


class MaskError(ValueError):
    """A mask that cannot be decoded, or whose size disagrees with its image."""


# --- COCO RLE ---------------------------------------------------------------------------------

def coco_decode(rle: dict) -> np.ndarray:
    """A COCO RLE (compressed ``counts`` string or uncompressed list) as an HxW uint8 0/1 array."""
    try:
        height, width = (int(v) for v in rle["size"])
        counts = rle["counts"]
        if isinstance(counts, list):
            if sum(counts) != height * width or any(c < 0 for c in counts):
                raise MaskError(f"uncompressed RLE runs sum to {sum(counts)}, not {height}x{width}")
            rle = coco_mask.frPyObjects({"size": [height, width], "counts": counts}, height, width)
        else:
            rle = {"size": [height, width], "counts": counts.encode("ascii") if isinstance(counts, str) else counts}
        mask = coco_mask.decode(rle)
    except MaskError:
        raise
    except Exception as exc:  # pycocotools raises bare Exceptions and TypeErrors on garbage
        raise MaskError(f"malformed COCO RLE ({type(exc).__name__}: {exc})") from None
    if mask.shape != (height, width):
        raise MaskError(f"COCO RLE decodes to {mask.shape}, its size says {height}x{width}")
    return mask


def coco_encode(mask: np.ndarray) -> dict:
    """An HxW 0/1 array as a COCO RLE with a ``counts`` string (the record model's form)."""
    rle = coco_mask.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": rle["counts"].decode("ascii")}


def coco_area_and_box(rle: dict) -> tuple[float, list[float]]:
    """Pixel area and pycocotools XYWH box of a COCO RLE."""
    raw = {"size": rle["size"], "counts": rle["counts"].encode("ascii")}
    return float(coco_mask.area(raw)), [float(v) for v in coco_mask.toBbox(raw)]


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two same-size 0/1 masks (0 when both are empty)."""
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b)) / union if union else 0.0


def box_iou(a: list[float], b: list[float]) -> float:
    """Intersection over union of two XYWH boxes."""
    ax2, ay2, bx2, by2 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    iw = max(0.0, min(ax2, bx2) - max(a[0], b[0]))
    ih = max(0.0, min(ay2, by2) - max(a[1], b[1]))
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


# --- Label Studio brush RLE -------------------------------------------------------------------

def labelstudio_encode(mask: np.ndarray) -> list[int]:
    """An HxW 0/1 mask as Label Studio brush RLE (RGBA all 255 inside the mask)."""
    from label_studio_sdk.converter.brush import mask2rle

    return [int(v) for v in mask2rle((mask > 0).astype(np.uint8) * 255)]


def labelstudio_decode(rle: list[int], width: int, height: int) -> np.ndarray:
    """Label Studio brush RLE of a ``width`` x ``height`` image as an HxW 0/1 mask (alpha > 0).

    Raises MaskError when the bytes are not a brush RLE or encode another number of values
    than ``width * height * 4`` (a mask made for an image of another size).
    """
    from label_studio_sdk.converter.brush import decode_rle

    if not isinstance(rle, list) or len(rle) < 6 or not all(isinstance(v, int) and 0 <= v <= 255 for v in rle):
        raise MaskError("brush RLE is not a list of at least 6 byte values")
    declared = int.from_bytes(bytes(rle[:4]), "big")
    if declared != width * height * 4:
        raise MaskError(f"brush RLE holds {declared} values, an RGBA image of {width}x{height} has {width * height * 4}")
    try:
        flat = decode_rle(rle)
    except (ValueError, IndexError) as exc:  # the bit stream ended before the declared values
        raise MaskError(f"malformed brush RLE ({exc or type(exc).__name__})") from None
    return (flat.reshape(height, width, 4)[:, :, 3] > 0).astype(np.uint8)


# --- CVAT for images 1.1 mask RLE -------------------------------------------------------------

@dataclass(frozen=True)
class CvatMask:
    """A CVAT 1.1 ``<mask>``: runs over the box ``left, top, width, height`` (pixels)."""

    rle: str
    left: int
    top: int
    width: int
    height: int


def cvat_encode(mask: np.ndarray) -> CvatMask | None:
    """The CVAT form of a 0/1 mask, cropped to its tight box; None for an empty mask."""
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    top, bottom, left, right = int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])
    flat = mask[top:bottom + 1, left:right + 1].astype(bool).ravel()
    edges = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    bounds = np.concatenate(([0], edges, [flat.size]))
    runs = np.diff(bounds).tolist()
    if flat[0]:  # the run list starts with background
        runs.insert(0, 0)
    return CvatMask(", ".join(map(str, runs)), left, top, right - left + 1, bottom - top + 1)


def cvat_decode(rle: str, left: int, top: int, width: int, height: int, image_width: int, image_height: int) -> np.ndarray:
    """A CVAT mask placed in an ``image_height`` x ``image_width`` 0/1 array.

    Raises MaskError for runs that are not whole numbers, that do not sum to ``width * height``,
    or a box that leaves the image.
    """
    try:
        runs = np.array([int(v) for v in rle.replace(",", " ").split()], dtype=np.int64)
    except ValueError:
        raise MaskError(f"CVAT mask rle is not a list of whole numbers: {rle[:40]!r}") from None
    if width <= 0 or height <= 0 or left < 0 or top < 0 or left + width > image_width or top + height > image_height:
        raise MaskError(f"CVAT mask box left={left} top={top} {width}x{height} leaves the "
                        f"{image_width}x{image_height} image")
    if runs.size == 0 or (runs < 0).any() or int(runs.sum()) != width * height:
        raise MaskError(f"CVAT mask runs sum to {int(runs.sum()) if runs.size else 0}, its box has {width * height} pixels")
    values = np.arange(runs.size) % 2  # background first
    crop = np.repeat(values, runs).astype(np.uint8).reshape(height, width)
    full = np.zeros((image_height, image_width), dtype=np.uint8)
    full[top:top + height, left:left + width] = crop
    return full
