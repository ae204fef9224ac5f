"""The card's example pictures: the image at its true size, its evidence filled and labelled, the question as caption.

A picture is the image's own pixels where its bytes are at hand (and its license allows a derivative), else a
grey canvas of the image's true size (the images table's width and height) saying why there are no pixels (a
dark band along its lower edge).
On it each evidence region (in the order the question names them) gets its COCO RLE mask filled in a
translucent colour, its box outlined and a numbered tag with its label at the box's corner. Under the image, a
caption band holds the question, the answer and the legend (tag, colour, label); the image area above it keeps
the true width and height. The font is the one bundled with Pillow and the PNG encoder settings are fixed, so the
bytes depend only on the inputs and the Pillow version.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from reasonvqa import masks

if TYPE_CHECKING:
    from PIL import Image

GREY = (128, 128, 128)
COLOURS = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240),
           (240, 50, 230), (210, 245, 60)]
ALPHA = 0.6  # the mask colour's weight over the pixels


def canvas_size(regions: list[dict]) -> tuple[int, int]:
    """(width, height) of an image when the images table lists none: a mask's size when one has a mask, else the
    boxes' extent."""
    for r in regions:
        if r.get("mask"):
            h, w = r["mask"]["size"]
            return int(w), int(h)
    return (max(1, int(np.ceil(max(r["x"] + r["w"] for r in regions)))),
            max(1, int(np.ceil(max(r["y"] + r["h"] for r in regions)))))


def region_name(region: dict, n: int) -> str:
    """The tag of the n-th evidence region (0-based): its number and its label (SA-1B segments have none)."""
    return f"{n + 1} {region.get('label') or 'segment'}"


def font_size(width: int) -> int:
    """Text size for an image ``width`` pixels wide (about 60 characters per line, at least 10 px)."""
    return max(10, round(width / 60))


def draw_example(regions: list[dict], path: Path, photo: bytes | None = None, *, size: tuple[int, int] | None = None,
                 caption: str = "", why_blank: str | None = None) -> dict:
    """Write the PNG of one example and return what it shows: {width, height (the image area), caption_height,
    background}. ``photo``: the image's encoded bytes (then its own size is the true size); else a canvas of
    ``size`` (or ``canvas_size``) with ``why_blank`` written on it."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.open(io.BytesIO(photo)).convert("RGB") if photo is not None else None
    width, height = image.size if image is not None else (size or canvas_size(regions))
    canvas = image if image is not None else Image.new("RGB", (width, height), GREY)
    font = ImageFont.load_default(size=font_size(width))
    if not isinstance(font, ImageFont.FreeTypeFont):  # Pillow without FreeType falls back to a fixed bitmap font
        raise RuntimeError("the example pictures need Pillow built with FreeType (its scalable default font)")
    if image is None:
        note = f"no pixels here ({why_blank or 'none given'}); a blank canvas of the image's size, {width} x {height}"
        # at the bottom edge: the tags sit above their boxes, so they meet the top edge more often
        _text_block(ImageDraw.Draw(canvas), note, height, width, font, fill=(255, 255, 255), background=(64, 64, 64))
    _fill_masks(canvas, regions)
    draw = ImageDraw.Draw(canvas)
    for n, r in enumerate(regions):
        colour = COLOURS[n % len(COLOURS)]
        box = [r["x"], r["y"], r["x"] + r["w"], r["y"] + r["h"]]
        draw.rectangle(box, outline=colour, width=max(2, width // 400))
        tag = region_name(r, n)
        left, top = max(0, min(r["x"], width - draw.textlength(tag, font=font) - 4)), max(0, r["y"] - font.size - 4)
        draw.rectangle([left, top, left + draw.textlength(tag, font=font) + 4, top + font.size + 4], fill=colour)
        draw.text((left + 2, top + 1), tag, fill=(255, 255, 255), font=font)
    legend = "; ".join(f"[{region_name(r, n)}]" for n, r in enumerate(regions))
    band = _caption(caption, legend, width, font)
    picture = Image.new("RGB", (width, height + band.height), (255, 255, 255))
    picture.paste(canvas, (0, 0))
    picture.paste(band, (0, height))
    path.parent.mkdir(parents=True, exist_ok=True)
    picture.save(path, format="PNG", optimize=False, compress_level=6)  # fixed encoder settings: same bytes
    return {"width": width, "height": height, "caption_height": band.height}


def _fill_masks(canvas, regions: list[dict]) -> None:
    """Blend each region's mask (its full-size RLE, decoded) with its colour over ``canvas``, in place."""
    from PIL import Image
    for n, r in enumerate(regions):
        if not r.get("mask"):
            continue
        bits = Image.fromarray(masks.coco_decode(r["mask"]) * 255)
        if bits.size != canvas.size:  # a mask of another size than the image (should not happen): fit it
            bits = bits.resize(canvas.size, Image.Resampling.NEAREST)
        canvas.paste(Image.blend(canvas, Image.new("RGB", canvas.size, COLOURS[n % len(COLOURS)]), ALPHA), mask=bits)


def _caption(caption: str, legend: str, width: int, font) -> "Image.Image":
    """A white band ``width`` wide with the caption and the legend, wrapped to the width."""
    from PIL import Image, ImageDraw

    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    lines = _wrapped(caption, width, font, probe) + _wrapped(f"evidence: {legend}" if legend else "", width, font, probe)
    line = font.size + 4
    band = Image.new("RGB", (width, max(1, line * len(lines) + 6)), (255, 255, 255))
    draw = ImageDraw.Draw(band)
    for k, text in enumerate(lines):
        draw.text((3, 3 + k * line), text, fill=(0, 0, 0), font=font)
    return band


def _wrapped(text: str, width: int, font, draw) -> list[str]:
    """``text`` cut into lines that fit ``width`` pixels (at word breaks; a word longer than a line is cut)."""
    if not text:
        return []
    per_line = max(1, int((width - 6) / max(draw.textlength("n", font=font), 1)))
    lines = textwrap.wrap(text, width=per_line, break_long_words=True) or [text]
    while per_line > 1 and any(draw.textlength(t, font=font) > width - 6 for t in lines):
        per_line -= 1
        lines = textwrap.wrap(text, width=per_line, break_long_words=True)
    return lines


def _text_block(draw, text: str, bottom: int, width: int, font, fill, background) -> None:
    """``text`` wrapped to ``width`` on a filled block whose lower edge is at ``bottom``."""
    lines = _wrapped(text, width, font, draw)
    line = font.size + 4
    top = max(0, bottom - (line * len(lines) + 6))
    draw.rectangle([0, top, width, bottom], fill=background)
    for k, t in enumerate(lines):
        draw.text((3, top + 3 + k * line), t, fill=fill, font=font)
