"""Every mask encoding the product reads or writes, in one place.

- COCO RLE, the record model's form (``regions.mask``): ``{"size": [H, W], "counts": str}`` with
  ``counts`` the compressed string of pycocotools (column-major runs, background first, each run in
  5-bit groups as characters from "0", the fourth run on as the difference to the run two before);
  readers also take the uncompressed form of COCO's ``iscrowd`` annotations (``counts`` a list of
  run lengths) and ``counts`` as bytes.
  pycocotools does the raster work; runs are parsed here (vectorized) where a check or a conversion
  needs them without the H x W raster.
- Label Studio brush RLE (bit-packed runs over the flattened RGBA buffer, the mask in the alpha
  channel) in the format of label-studio-sdk's converter.
- CVAT for images 1.1 ``rle`` (runs over the mask's own box, row-major, starting with a background run).
- Polygons (CVAT ``<polygon>`` points) rasterized as COCO does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from pycocotools import mask as coco_mask

# pycocotools' area()/encode() keep the mask count of one call in a uint8 under numpy 2: more than
# 255 masks at once raise OverflowError, and SA-1B images often hold more.
MASKS_PER_CALL = 255
# coco_problems parses this many counts strings per numpy pass: a few MB of characters, whatever the file's size
RLES_PER_PASS = 2048


class MaskError(ValueError):
    """A mask that cannot be decoded, or whose size disagrees with its image."""


# --- COCO RLE ---------------------------------------------------------------------------------

def coco_decode(rle: dict) -> np.ndarray:
    """A COCO RLE (compressed ``counts`` string or bytes, or uncompressed list) as an HxW uint8 0/1 array."""
    try:
        height, width = (int(v) for v in rle["size"])
        counts = rle["counts"]
        if isinstance(counts, list):
            if sum(counts) != height * width or any(c < 0 for c in counts):
                raise MaskError(f"uncompressed RLE runs sum to {sum(counts)}, not {height}x{width}")
            rle = coco_mask.frPyObjects({"size": [height, width], "counts": counts}, height, width)  # type: ignore[call-overload]  # pycocotools stubs: RLE as private TypedDict _EncodedRLE with str counts (C code takes/returns bytes)
        else:
            runs = _coco_counts(counts) if isinstance(counts, str) else None
            if runs is not None and int(runs.sum()) != height * width:  # pycocotools would read past them
                raise MaskError(f"RLE runs sum to {int(runs.sum())}, not {height}x{width}")
            rle = {"size": [height, width], "counts": counts.encode("ascii") if isinstance(counts, str) else counts}
        mask = coco_mask.decode(rle)  # type: ignore[arg-type]  # pycocotools stubs (see above)
    except MaskError:
        raise
    except Exception as exc:  # pycocotools raises bare Exceptions and TypeErrors on garbage
        raise MaskError(f"malformed COCO RLE ({type(exc).__name__}: {exc})") from None
    if mask.shape != (height, width):
        raise MaskError(f"COCO RLE decodes to {mask.shape}, its size says {height}x{width}")
    return mask


def coco_encode(mask: np.ndarray) -> dict:
    """An HxW mask (non-zero = inside) as a COCO RLE with a ``counts`` string (the record model's form)."""
    return coco_encode_stack(np.asarray(mask)[None])[0]


def coco_encode_stack(masks: np.ndarray) -> list[dict]:
    """``(N, H, W)`` masks (non-zero = inside) as COCO RLEs with ``counts`` strings, in one pycocotools call per 255."""
    masks = np.asarray(masks)
    if masks.ndim != 3:
        raise ValueError(f"masks must have shape (N, H, W), got {masks.shape}")
    if masks.dtype != bool:
        masks = masks != 0
    out = []
    for start in range(0, len(masks), MASKS_PER_CALL):
        # one copy into the (H, W, N) column-major uint8 pycocotools reads (none for one Fortran-order mask)
        layers = np.asfortranarray(masks[start:start + MASKS_PER_CALL].transpose(1, 2, 0)).view(np.uint8)
        out += [{"size": [int(s) for s in rle["size"]], "counts": rle["counts"].decode("ascii")}  # type: ignore[index, attr-defined]  # pycocotools stubs (see above)
                for rle in coco_mask.encode(layers)]
    return out


def coco_encode_changes(owner: np.ndarray, position: np.ndarray, first: np.ndarray,
                        height: int, width: int) -> tuple[list[dict], np.ndarray]:
    """COCO RLEs (``counts`` strings, as ``coco_encode_stack`` writes them) and areas of ``len(first)`` masks
    given where their column-major scan changes value: mask ``owner[k]`` starts a new run at flat
    column-major index ``position[k]`` (1 to H*W - 1), sorted by owner, then position; ``first`` is
    each mask's pixel (0, 0).

    Work and memory follow the number of runs, not of pixels: the changes can be found where the masks
    are (a GPU) and only they cross to the host (tasks/proposals/masks.py)."""
    count, total = len(first), height * width
    if not count:
        return [], np.zeros(0, dtype=np.float64)
    owner, position = np.asarray(owner, np.int64), np.asarray(position, np.int64)
    lead = np.asarray(first, bool).astype(np.int64)  # a mask whose first pixel is inside starts with an empty run
    changes = np.bincount(owner, minlength=count)
    per_mask = changes + 1 + lead
    start = np.cumsum(per_mask) - per_mask
    rank = np.arange(owner.size) - np.repeat(np.cumsum(changes) - changes, changes)
    previous = np.concatenate(([0], position[:-1]))
    previous[rank == 0] = 0
    runs = np.zeros(int(per_mask.sum()), dtype=np.int64)
    runs[start[owner] + lead[owner] + rank] = position - previous
    last = np.zeros(count, dtype=np.int64)
    has = changes > 0
    last[has] = position[np.cumsum(changes)[has] - 1]
    runs[start + lead + changes] = total - last
    run_owner = np.repeat(np.arange(count), per_mask)
    index = np.arange(runs.size) - np.repeat(start, per_mask)
    odd = index % 2 == 1  # foreground runs
    areas = np.bincount(run_owner[odd], weights=runs[odd], minlength=count)
    strings = _counts_strings(runs, index, run_owner, count)
    return [{"size": [height, width], "counts": text} for text in strings], areas.astype(np.float64)


def _counts_strings(runs: np.ndarray, index: np.ndarray, run_owner: np.ndarray, count: int) -> list[str]:
    """pycocotools' rleToString of each mask's runs, vectorized over all runs: from the fourth run on the
    difference to the run two before, each number in 5-bit groups (low first, 0x20 = more follow) + 48."""
    value = runs.copy()
    later = np.flatnonzero(index > 2)
    value[later] -= runs[later - 2]
    groups, valid = [], []
    active = np.ones(value.size, dtype=bool)
    while active.any():  # at most 7 rounds for runs below 2**32
        group = value & 0x1F
        value = value >> 5  # arithmetic shift, as on the C long
        more = np.where(group & 0x10, value != -1, value != 0)
        groups.append((group | (more << 5)) + 48)
        valid.append(active)
        active = active & more
    chars = np.stack(groups, axis=1)[np.stack(valid, axis=1)].astype(np.uint8).tobytes().decode("ascii")
    ends = np.cumsum(np.bincount(run_owner, weights=np.stack(valid, axis=1).sum(axis=1), minlength=count)).astype(np.int64)
    return [chars[a:b] for a, b in zip(np.concatenate(([0], ends[:-1])).tolist(), ends.tolist())]


def coco_areas(rles: Sequence[dict]) -> np.ndarray:
    """Pixels covered by each compressed COCO RLE (``counts`` str or bytes), as float64 (pycocotools, unchecked)."""
    if not len(rles):
        return np.zeros(0, dtype=np.float64)
    parts = [coco_mask.area(list(rles[i:i + MASKS_PER_CALL])) for i in range(0, len(rles), MASKS_PER_CALL)]  # type: ignore[arg-type]  # pycocotools stubs (see above)
    return np.concatenate(parts).astype(np.float64, copy=False)


def coco_area(rle: dict) -> int:
    """Pixels covered by one COCO RLE after checking it: ``size`` two positive integers, ``counts`` a
    compressed ASCII string (or an uncompressed list) whose runs cover exactly H x W pixels. MaskError otherwise."""
    try:
        height, width = (int(v) for v in rle["size"])
        counts = rle["counts"]
    except (KeyError, TypeError, ValueError):
        raise MaskError(f"COCO RLE without a [height, width] size and counts: {str(rle)[:60]}") from None
    if height <= 0 or width <= 0:
        raise MaskError(f"COCO RLE size {height}x{width} is empty")
    if isinstance(counts, list):
        runs = np.array(counts, dtype=np.int64) if all(isinstance(c, int) for c in counts) else None
    elif isinstance(counts, str):
        runs = _coco_counts(counts)
    else:
        runs = None
    if runs is None or (runs < 0).any():
        raise MaskError(f"COCO RLE counts are not runs pycocotools reads: {str(counts)[:40]!r}")
    if int(runs.sum()) != height * width:
        raise MaskError(f"COCO RLE runs sum to {int(runs.sum())}, not {height}x{width}")
    return int(runs[1::2].sum())


def coco_area_and_box(rle: dict) -> tuple[float, list[float]]:
    """Pixel area and pycocotools XYWH box of a compressed COCO RLE."""
    raw = _compressed(rle)
    return float(coco_mask.area(raw)), [float(v) for v in coco_mask.toBbox(raw)]  # type: ignore[call-overload, arg-type]  # pycocotools stubs (see above)


def rle_iou(a: dict, b: dict) -> float:
    """Intersection over union of two same-size compressed COCO RLEs, computed on their runs (0 when both are empty)."""
    return float(coco_mask.iou([_compressed(a)], [_compressed(b)], [0])[0][0])  # type: ignore[arg-type]  # pycocotools stubs (see above)


def coco_checked(rle: dict) -> dict:
    """A COCO RLE (compressed ``counts`` string, or uncompressed run list) checked as ``coco_area`` does and
    returned compressed with ``counts`` as the ASCII bytes pycocotools reads; MaskError otherwise."""
    if not isinstance(rle, dict):
        raise MaskError(f"a COCO RLE is an object with size and counts, not {type(rle).__name__}")
    coco_area(rle)
    return coco_compressed(rle)


def coco_compressed(rle: dict) -> dict:
    """A checked COCO RLE (``coco_area`` or ``coco_problems`` found nothing) with ``counts`` as the ASCII bytes
    pycocotools reads (an uncompressed run list compressed)."""
    if isinstance(rle["counts"], list):
        height, width = (int(v) for v in rle["size"])
        return coco_mask.frPyObjects({"size": [height, width], "counts": rle["counts"]}, height, width)  # type: ignore[call-overload]  # pycocotools stubs (see above)
    return _compressed(rle)


def coco_problems(rles: Sequence[object]) -> list[str | None]:
    """Per RLE, why ``coco_checked`` would refuse it (None: it is a valid COCO RLE). The compressed ``counts``
    strings of all of them are parsed in one vectorized pass (``_counts_sums``): many small masks cost one
    numpy pass, not one per mask."""
    problems: list[str | None] = [None] * len(rles)
    strings: list[tuple[int, str, int]] = []  # (position, counts, height x width) of the compressed ones
    for i, rle in enumerate(rles):
        try:
            height, width = (int(v) for v in rle["size"])  # type: ignore[index]
            counts = rle["counts"]  # type: ignore[index]
        except (KeyError, TypeError, ValueError):
            problems[i] = f"COCO RLE without a [height, width] size and counts: {str(rle)[:60]}"
            continue
        if isinstance(counts, str) and counts.isascii() and height > 0 and width > 0:
            strings.append((i, counts, height * width))
            continue
        try:
            coco_area(rle)  # type: ignore[arg-type]
        except MaskError as exc:
            problems[i] = str(exc)
    for start in range(0, len(strings), RLES_PER_PASS):
        chunk = strings[start:start + RLES_PER_PASS]
        sums = _counts_sums([c for _, c, _ in chunk])
        for (i, counts, pixels), total in zip(chunk, sums.tolist()):
            if total < 0:
                problems[i] = f"COCO RLE counts are not runs pycocotools reads: {counts[:40]!r}"
            elif total != pixels:
                problems[i] = f"COCO RLE runs sum to {total}, not {pixels // max(1, int(rles[i]['size'][1]))}x{int(rles[i]['size'][1])}"  # type: ignore[index]
    return problems


def _counts_sums(strings: list[str]) -> np.ndarray:
    """The sum of the runs of each compressed COCO ``counts`` string (as ``_coco_counts`` reads them, all strings
    at once), -1 for a string whose runs are unreadable (a bad character, a number left open, a negative run)."""
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    if not lengths.sum():
        return np.zeros(len(strings), dtype=np.int64)
    raw = np.frombuffer("".join(strings).encode("ascii"), dtype=np.uint8)
    nonempty = lengths > 0
    firsts = (np.cumsum(lengths) - lengths)[nonempty]  # each non-empty string's first character
    ends = firsts + lengths[nonempty] - 1
    bad = np.zeros(len(strings), dtype=bool)
    bad[nonempty] = np.maximum.reduceat((raw < 48) | (raw > 48 + 63), firsts)  # a character outside "0".."o"
    chars = np.clip(raw, 48, 48 + 63) - np.uint8(48)
    bad[nonempty] |= (chars[ends] & 0x20) != 0  # the last number is left open
    opens = np.empty(chars.size, dtype=bool)
    opens[0] = True
    np.equal(chars[:-1] & 0x20, 0, out=opens[1:])  # after the last character of a number
    opens[firsts] = True  # a number never runs on into the next string (a bad one may)
    starts = np.flatnonzero(opens)
    digits = np.diff(np.append(starts, chars.size))  # characters per number
    position = np.arange(chars.size, dtype=np.int32) - np.repeat(starts.astype(np.int32), digits)
    number_owner = np.repeat(np.flatnonzero(nonempty), np.add.reduceat(opens, firsts))
    bad[number_owner[digits > 7]] = True  # more than 35 bits: _coco_counts leaves it to pycocotools
    shift = 5 * np.minimum(position, 6).astype(np.int64)
    x = np.add.reduceat((chars & 0x1F).astype(np.int64) << shift, starts)
    tail = starts + digits - 1
    x -= np.where(chars[tail] & 0x10, np.int64(1) << (shift[tail] + 5), 0)  # sign of the last 5-bit group
    counts_per = np.bincount(number_owner, minlength=len(strings))
    local = np.arange(len(x)) - np.repeat(np.cumsum(counts_per) - counts_per, counts_per)
    for parity, begin in ((0, 2), (1, 1)):  # from the fourth count on, each adds the count two before
        chosen = np.flatnonzero((local % 2 == parity) & (local >= begin))
        if not chosen.size:
            continue
        values = x[chosen]
        running = np.cumsum(values)
        segment = number_owner[chosen]
        new = np.concatenate(([True], segment[1:] != segment[:-1]))
        offset = np.repeat((running - values)[new], np.diff(np.append(np.flatnonzero(new), chosen.size)))
        x[chosen] = running - offset
    bad[number_owner[x < 0]] = True
    sums = np.bincount(number_owner, weights=x, minlength=len(strings)).astype(np.int64)
    return np.where(bad, -1, sums)


def box_rles(boxes: Sequence[Sequence[float]], height: int, width: int) -> list[dict]:
    """XYWH boxes (pixels) as compressed COCO RLEs of an image of ``height`` x ``width`` (clipped to it)."""
    if not len(boxes):
        return []
    return coco_mask.frPyObjects(np.asarray(boxes, dtype=np.float64).reshape(-1, 4), height, width)  # type: ignore[arg-type, return-value]  # pycocotools stubs (see above)


def coco_iou_matrix(predicted: Sequence[dict], truth: Sequence[dict]) -> np.ndarray:
    """IoU of every compressed RLE in ``predicted`` with every one in ``truth`` (all of one image's size), as a
    ``(len(predicted), len(truth))`` float64 array, in one pycocotools call."""
    if not len(predicted) or not len(truth):
        return np.zeros((len(predicted), len(truth)), dtype=np.float64)
    ious = coco_mask.iou([_compressed(r) for r in predicted], [_compressed(r) for r in truth], [0] * len(truth))  # type: ignore[arg-type]  # pycocotools stubs (see above)
    return np.asarray(ious, dtype=np.float64).reshape(len(predicted), len(truth))


def polygon_mask(points: Sequence[float], height: int, width: int) -> np.ndarray:
    """A polygon ``[x1, y1, x2, y2, ...]`` (pixel coordinates) rasterized as COCO does, as an HxW uint8 0/1 array."""
    if len(points) < 6 or len(points) % 2:
        raise MaskError("a polygon needs at least three x,y points")
    return coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects([list(points)], height, width)))  # type: ignore[arg-type]  # pycocotools stubs (see above)


def _compressed(rle: dict) -> dict:
    """The RLE with ``counts`` as the ASCII bytes pycocotools reads."""
    counts = rle["counts"]
    return {"size": list(rle["size"]), "counts": counts.encode("ascii") if isinstance(counts, str) else counts}


def _coco_counts(counts: str) -> np.ndarray | None:
    """Column-major run lengths of a compressed COCO ``counts`` string (pycocotools' rleFrString,
    vectorized); None for a string that function would misread (it is then left to pycocotools)."""
    if not counts.isascii():
        return None
    chars = np.frombuffer(counts.encode("ascii"), dtype=np.uint8).astype(np.int64) - 48
    if chars.size == 0:
        return np.zeros(0, np.int64)
    if (chars < 0).any() or (chars > 63).any() or chars[-1] & 0x20:
        return None
    last = (chars & 0x20) == 0  # the last character of each number
    starts = np.flatnonzero(np.concatenate(([True], last[:-1])))
    shift = 5 * (np.arange(chars.size) - np.repeat(starts, np.diff(np.append(starts, chars.size))))
    if shift.max() > 30:
        return None
    x = np.add.reduceat((chars & 0x1F) << shift, starts)
    x -= np.where(chars[last] & 0x10, 1 << (shift[last] + 5), 0)  # sign of the last 5-bit group
    x[2::2] = np.cumsum(x[2::2])  # from the fourth count on, each is a difference to the count two before (x[2] is itself)
    x[1::2] = np.cumsum(x[1::2])
    return x if (x >= 0).all() else None


def _row_major_runs(counts: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, lengths) of the row-major runs of a mask given by its column-major COCO runs.

    Works on the foreground intervals of each column instead of the H x W raster: pixel (r, c)
    starts a row-major run where column c differs from column c - 1 at row r (the symmetric
    difference of their intervals), or, for c = 0, where (r, 0) differs from (r - 1, W - 1).
    """
    return _segment_runs(*_column_segments(counts, height), height, width)


def _column_segments(counts: np.ndarray, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(column, first row, end row) of each foreground interval of a column-major COCO run list."""
    ends = np.cumsum(counts)
    fg = np.flatnonzero(counts[1::2]) * 2 + 1  # the odd runs are foreground
    s, e = ends[fg] - counts[fg], ends[fg]
    first_col, last_col = s // height, (e - 1) // height
    n_seg = last_col - first_col + 1  # a run that wraps into the next column is cut there
    run_of = np.repeat(np.arange(fg.size), n_seg)
    col = first_col[run_of] + np.arange(run_of.size) - np.repeat(np.cumsum(n_seg) - n_seg, n_seg)
    r0 = np.where(col == first_col[run_of], s[run_of] - col * height, 0)
    r1 = np.where(col == last_col[run_of], e[run_of] - col * height, height)
    return col, r0, r1


def _segment_runs(col: np.ndarray, r0: np.ndarray, r1: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, lengths) of the row-major runs of the height x width mask made of these column intervals."""
    # where column c differs from c - 1: boundaries of both, a boundary in both cancels
    ev_col = np.concatenate((col, col, col + 1, col + 1))
    ev_row = np.concatenate((r0, r1, r0, r1))
    keep = (ev_col >= 1) & (ev_col < width)
    keys, times = np.unique(ev_col[keep] * (height + 1) + ev_row[keep], return_counts=True)
    keys = keys[times % 2 == 1]  # each column keeps an even number: they pair up as [from, to)
    c, a, b = keys[0::2] // (height + 1), keys[0::2] % (height + 1), keys[1::2] % (height + 1)
    span = b - a
    rows = np.repeat(a, span) + np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span)
    inner = rows * width + np.repeat(c, span)

    def column(k: int) -> np.ndarray:
        edges = np.zeros(height + 1, np.int64)
        np.add.at(edges, r0[col == k], 1)
        np.add.at(edges, r1[col == k], -1)
        return np.cumsum(edges[:height])

    left, right = column(0), column(width - 1)
    wrap = (np.flatnonzero(left[1:] != right[:-1]) + 1) * width
    starts = np.concatenate(([0], np.sort(np.concatenate((inner, wrap)))))
    lengths = np.diff(np.append(starts, height * width))
    return (int(left[0]) + np.arange(starts.size)) % 2, lengths


def labelstudio_encode_coco(rle: dict) -> bytes:
    """``labelstudio_encode_bytes(coco_decode(rle))`` without building the H x W raster.

    A compressed COCO RLE is converted run by run; anything else (uncompressed counts, a string
    pycocotools would read differently or reject) goes through ``coco_decode``, with its errors.
    """
    height, width = (int(v) for v in rle["size"])
    counts = _coco_counts(rle["counts"]) if isinstance(rle.get("counts"), str) and height * width > 0 else None
    if counts is None or int(counts.sum()) != height * width:
        return labelstudio_encode_bytes(coco_decode(rle))
    values, lengths = _row_major_runs(counts, height, width)
    return _encode_runs(values * 255, lengths * 4)


# --- Label Studio brush RLE -------------------------------------------------------------------
# The format of label-studio-sdk's converter/brush.py (encode_rle / decode_rle, from thi-ng's
# rle-pack): a 32-bit value count, 5 bits word size - 1 (8 bits here), four 4-bit run-length
# field sizes - 1 ([3, 4, 8, 16]), then per run: 1 bit "repeat", 2 bits field index, the run
# length - 1 in that many bits, and the value (or, without "repeat", that many literal values);
# zero bits pad to whole bytes. The SDK builds it as Python bit strings (about 50 ms to encode and
# 115 ms to decode one 640x480 mask here); this is the same format with numpy, checked byte for
# byte against the SDK in tests/annotation_exports/test_masks.py.

_LS_WORD = 8
_LS_FIELDS = (3, 4, 8, 16)
_LS_HEADER = 32 + 5 + 4 * 4
_LS_FIELD_SIZES = np.array(_LS_FIELDS, dtype=np.int64)
_LS_FIELD_LIMITS = 1 << _LS_FIELD_SIZES[:-1]  # run lengths up to 8, 16, 256 fit the first three fields
_BIT_SHIFTS = np.arange(31, -1, -1, dtype=np.uint64)


def _runs(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, lengths) of the runs of equal values in a 1-D array."""
    edges = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    starts = np.concatenate(([0], edges))
    return flat[starts].astype(np.int64), np.diff(np.concatenate((starts, [flat.size]))).astype(np.int64)


def _encode_runs(run_values: np.ndarray, lengths: np.ndarray) -> bytes:
    n = int(lengths.sum())
    # runs over 65536 values are written as 65536-value pieces first (as the SDK does)
    full = np.maximum((lengths - 1) // 65536, 0)
    if full.any():
        count = np.repeat(np.arange(lengths.size), full + 1)
        last = np.concatenate((count[1:] != count[:-1], [True]))
        piece_lengths = np.where(last, np.repeat(lengths - full * 65536, full + 1), 65536)
        piece_values = np.repeat(run_values, full + 1)
    else:
        piece_lengths, piece_values = lengths, run_values
    field = np.searchsorted(_LS_FIELD_LIMITS, piece_lengths)  # the smallest field the length - 1 fits in
    size = _LS_FIELD_SIZES[field]
    repeat = (piece_lengths > 1).astype(np.int64)  # a single value: "0", "00", "000", value
    code = (((repeat << 2 | field) << size | (piece_lengths - 1)) << _LS_WORD) | piece_values
    header = (n << 21) | ((_LS_WORD - 1) << 16) | sum((f - 1) << (12 - 4 * k) for k, f in enumerate(_LS_FIELDS))
    # one row of 32 bits per code (at most 3 + 16 + 8 bits; the 53-bit header as 21 + 32)
    codes = np.concatenate(([header >> 32, header & 0xFFFFFFFF], code)).astype(np.uint64)
    widths = np.concatenate(([_LS_HEADER - 32, 32], 1 + 2 + size + _LS_WORD)).astype(np.uint64)
    bits = ((codes[:, None] >> _BIT_SHIFTS) & np.uint64(1))[_BIT_SHIFTS < widths[:, None]].astype(np.uint8)
    pad = 8 - bits.size % 8  # 1 to 8 zero bits, as the SDK pads
    return np.packbits(np.concatenate((bits, np.zeros(pad, np.uint8)))).tobytes()


def labelstudio_encode_values(values: np.ndarray) -> list[int]:
    """Label Studio RLE bytes of a 1-D array of 0-255 values (the SDK's ``encode_rle`` output)."""
    flat = np.asarray(values).ravel()
    if flat.size == 0:
        raise MaskError("nothing to encode")
    return list(_encode_runs(*_runs(flat)))


def _byte_values(rle: object) -> bytes:
    try:
        if not isinstance(rle, list):
            raise TypeError
        return bytes(rle)
    except (TypeError, ValueError):
        raise MaskError("brush RLE is not a list of byte values (0-255)") from None


def labelstudio_decode_values(rle: object) -> np.ndarray:
    """The values of Label Studio RLE bytes (the SDK's ``decode_rle``); MaskError when malformed."""
    values, lengths = _labelstudio_runs(rle)
    return np.repeat(values, lengths)


def _labelstudio_runs(rle: object) -> tuple[np.ndarray, np.ndarray]:
    """(values, lengths) of the runs in Label Studio RLE bytes; MaskError when malformed."""
    raw = _byte_values(rle)
    total = len(raw) * 8
    if total < _LS_HEADER:
        raise MaskError("brush RLE is shorter than its header")
    bits = format(int.from_bytes(raw, "big"), f"0{total}b")
    num, word = int(bits[:32], 2), int(bits[32:37], 2) + 1
    fields = [int(bits[37 + 4 * k:41 + 4 * k], 2) + 1 for k in range(4)]
    values: list[int] = []
    lengths: list[int] = []
    pos, i = _LS_HEADER, 0
    try:
        while i < num:  # reads inlined: this loop runs once per run of every mask
            repeat = bits[pos] == "1"
            size = fields[int(bits[pos + 1:pos + 3], 2)]
            pos += 3 + size
            length = 1 + int(bits[pos - size:pos], 2)
            if repeat:
                pos += word
                values.append(int(bits[pos - word:pos], 2))
                lengths.append(length)
            else:
                for _ in range(length):
                    pos += word
                    values.append(int(bits[pos - word:pos], 2))
                    lengths.append(1)
            i += length
    except (IndexError, ValueError):  # ValueError: int("") past the end of the bits
        raise MaskError("brush RLE ends before its declared values") from None
    if pos > total or i != num:
        raise MaskError(f"brush RLE runs cover {i} values in {pos} bits, it declares {num} values in {total} bits")
    return np.array(values, dtype=np.uint8 if word <= 8 else np.uint32), np.array(lengths, dtype=np.int64)


def labelstudio_encode(mask: np.ndarray) -> list[int]:
    """An HxW 0/1 mask as Label Studio brush RLE: RGBA all 255 inside the mask (as the SDK's ``mask2rle``)."""
    return list(labelstudio_encode_bytes(mask))


def labelstudio_encode_bytes(mask: np.ndarray) -> bytes:
    """``labelstudio_encode`` as bytes (JSON holds them as a list of byte values)."""
    run_values, lengths = _runs((np.asarray(mask).ravel() > 0).astype(np.uint8))
    return _encode_runs(run_values * 255, lengths * 4)  # each pixel is 4 equal RGBA values


def labelstudio_decode(rle: object, width: int, height: int) -> np.ndarray:
    """Label Studio brush RLE of a ``width`` x ``height`` image as an HxW 0/1 mask (alpha > 0).

    Raises MaskError when the bytes are not a brush RLE or encode another number of values
    than ``width * height * 4`` (a mask made for an image of another size).
    """
    declared = int.from_bytes(_byte_values(rle)[:4], "big")
    if declared != width * height * 4:
        raise MaskError(f"brush RLE holds {declared} values, an RGBA image of {width}x{height} has {width * height * 4}")
    values, lengths = _labelstudio_runs(rle)
    ends = np.cumsum(lengths)
    # value k of the RGBA stream is channel k % 4 of pixel k // 4: a run [s, e) holds the alpha
    # values of pixels s // 4 to e // 4
    pixels = ends // 4 - (ends - lengths) // 4
    return np.repeat((values > 0).astype(np.uint8), pixels).reshape(height, width)


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


def cvat_encode_coco(rle: dict) -> CvatMask | None:
    """``cvat_encode(coco_decode(rle))`` from the COCO runs, without building the H x W raster."""
    height, width = (int(v) for v in rle["size"])
    counts = _coco_counts(rle["counts"]) if isinstance(rle.get("counts"), str) and height * width > 0 else None
    if counts is None or int(counts.sum()) != height * width:
        return cvat_encode(coco_decode(rle))
    col, r0, r1 = _column_segments(counts, height)
    if col.size == 0:
        return None
    left, top = int(col.min()), int(r0.min())
    box_width, box_height = int(col.max()) - left + 1, int(r1.max()) - top
    values, lengths = _segment_runs(col - left, r0 - top, r1 - top, box_height, box_width)
    runs = ([0] if values[0] else []) + lengths.tolist()  # the run list starts with background
    return CvatMask(", ".join(map(str, runs)), left, top, box_width, box_height)


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
    full = np.zeros((image_height, image_width), dtype=np.uint8, order="F")  # the order COCO RLE runs in
    full[top:top + height, left:left + width] = crop
    return full
