import io
import json
import tarfile

import numpy as np
import pyarrow as pa
from PIL import Image
from pycocotools import mask as mask_utils

from reasonvqa import schemas
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.tasks.release.breakdown import breakdown, breakdown_section, draw_example, write_breakdown
from reasonvqa.tasks.release.pixels import Pixels

QUESTIONS = schemas.from_rows([
    dict(question_id="a", image_id="sa1b:1", image_source="sa1b", question="Which is larger?", answer="x",
         kind="grounded", task_type="comparison", evidence_region_ids=["sa1b:1/g1", "sa1b:1/g2"], is_hallucination=False),
    dict(question_id="b", image_id="vg:1", image_source="vg", question="How many dogs?", answer="There are no dogs.",
         kind="grounded", task_type="counting", evidence_region_ids=[], is_hallucination=True,
         template_ids=["hallucination:absent_object"]),
    dict(question_id="d", image_id="vg:1", image_source="vg", question="What color is the cup under the table?",
         answer="No cup is under the table in the image.", kind="grounded", task_type="attribute", evidence_region_ids=[],
         is_hallucination=True, template_ids=["hallucination:impossible_relation"]),
    dict(question_id="c", image_id="vg:1", image_source="vg", question="Q?", answer="A", kind="template",
         task_type="knowledge", is_hallucination=False),
], schemas.QUESTIONS)


def rle(top, left, h, w):
    bits = np.zeros((30, 40), dtype=np.uint8, order="F")
    bits[top:top + h, left:left + w] = 1
    return {"size": [30, 40], "counts": mask_utils.encode(bits)["counts"].decode("ascii")}


REGIONS = schemas.from_rows([
    dict(region_id="sa1b:1/g1", image_id="sa1b:1", x=2.0, y=3.0, w=10.0, h=8.0, mask=rle(3, 2, 8, 10)),
    dict(region_id="sa1b:1/g2", image_id="sa1b:1", x=25.0, y=15.0, w=4.0, h=3.0, mask=rle(15, 25, 3, 4)),
], schemas.REGIONS)


def test_counts_per_task_type_domain_kind_and_multiplicity():
    report = breakdown(QUESTIONS, {"sa1b": "indoor/outdoor", "vg": "mixed"})
    assert report["task_type"] == {"attribute": 1, "comparison": 1, "counting": 1, "knowledge": 1}
    assert report["kind"] == {"grounded": 3, "template": 1}
    assert report["domain"] == {"indoor/outdoor": {"other": 1}, "mixed": {"hallucination": 2, "other": 1}}
    assert report["evidence_multiplicity"] == {"0": 2, "1": 0, "2": 1, "3": 0, "4": 0, "5-9": 0, "10+": 0}
    assert report["hallucination_form"] == {"absent_object": 1, "impossible_relation": 1}
    section = breakdown_section({**report, "examples": []})
    assert "| mixed | 1 | 2 |" in section and "| 2 | 1 |" in section
    assert "| absent object | 1 |" in section and "| impossible relation | 1 |" in section


def image_area(png) -> np.ndarray:
    """The pixels of a picture above its caption band (breakdown.json gives the band's height)."""
    return np.asarray(Image.open(png))


def test_example_pictures_fill_the_masks_and_are_byte_identical(tmp_path):
    write_breakdown(QUESTIONS, REGIONS, tmp_path / "a")
    write_breakdown(QUESTIONS, REGIONS, tmp_path / "b")
    png = tmp_path / "a" / "examples" / "comparison-a.png"
    assert png.read_bytes() == (tmp_path / "b" / "examples" / "comparison-a.png").read_bytes()
    example = json.loads((tmp_path / "a" / "breakdown.json").read_text())["examples"][0]
    assert (example["width"], example["height"]) == (40, 30)  # the masks' size: no images table here
    pixels = image_area(png)
    assert pixels.shape == (30 + example["caption_height"], 40, 3) and example["caption_height"] > 0
    # the regions change the canvas (on a canvas this small tags and note cover most of it: the large pictures
    # below check where the masks land)
    draw_example([], tmp_path / "none.png", size=(40, 30), why_blank="no_pixels", caption="Q: Which is larger?  A: x")
    assert not np.array_equal(pixels[:30], np.asarray(Image.open(tmp_path / "none.png"))[:30])
    assert (tmp_path / "a" / "breakdown.json").read_bytes() == (tmp_path / "b" / "breakdown.json").read_bytes()


def test_box_only_regions_are_outlined_on_a_canvas_of_the_true_size_that_says_why(tmp_path):
    shown = draw_example([{"x": 300.0, "y": 200.0, "w": 200.0, "h": 100.0, "mask": None, "label": "tree"}],
                         tmp_path / "box.png", size=(800, 600), why_blank="missing_file", caption="Q: Is it? A: yes")
    pixels = np.asarray(Image.open(tmp_path / "box.png"))
    assert (shown["width"], shown["height"]) == (800, 600)  # vg:1's size, not the boxes' extent
    assert pixels.shape == (600 + shown["caption_height"], 800, 3)
    assert tuple(pixels[250, 300]) != (128, 128, 128) and tuple(pixels[250, 400]) == (128, 128, 128)  # outline / inside
    assert (pixels[560:600, :200] != 128).any()  # the note saying there are no pixels, along the canvas's lower edge
    assert (pixels[600:] != 255).any()  # the caption
    tag = pixels[200 - 20:200, 300:340]  # the numbered label tag above the box's corner, in the first colour
    assert (np.abs(tag.astype(int) - [230, 25, 75]).sum(axis=2) == 0).sum() > 50


def sample_photo_and_regions() -> tuple[bytes, list[dict]]:
    """The bundled SA-1B sample's JPEG and its first two annotations, as regions rows."""
    with tarfile.open(SAMPLE_DIR / "sa1b" / "sa_000020.tar") as tar:
        photo = tar.extractfile("sa_226381.jpg").read()
        annotations = json.loads(tar.extractfile("sa_226381.json").read())["annotations"][:2]
    regions = [{"x": a["bbox"][0], "y": a["bbox"][1], "w": a["bbox"][2], "h": a["bbox"][3],
                "mask": {"size": a["segmentation"]["size"], "counts": a["segmentation"]["counts"]}} for a in annotations]
    return photo, regions


def test_picture_on_the_sample_photo_is_its_true_size_differs_from_the_blank_canvas_and_masks_land_on_their_pixels(tmp_path):
    photo, regions = sample_photo_and_regions()
    on_photo = draw_example(regions, tmp_path / "photo.png", photo, caption="Q: Which is larger? A: 1")
    on_blank = draw_example(regions, tmp_path / "blank.png", size=(2000, 1500), why_blank="missing_file",
                            caption="Q: Which is larger? A: 1")
    drawn = np.asarray(Image.open(tmp_path / "photo.png"))[:1500]
    blank = np.asarray(Image.open(tmp_path / "blank.png"))[:1500]
    original = np.asarray(Image.open(io.BytesIO(photo)).convert("RGB"))
    assert (on_photo["width"], on_photo["height"]) == (on_blank["width"], on_blank["height"]) == (2000, 1500)
    assert drawn.shape == blank.shape == (1500, 2000, 3) and not np.array_equal(drawn, blank)
    bits = mask_utils.decode({"size": regions[0]["mask"]["size"], "counts": regions[0]["mask"]["counts"].encode()}) > 0
    x0, y0 = int(regions[0]["x"]), int(regions[0]["y"])
    x1, y1 = int(regions[0]["x"] + regions[0]["w"]), int(regions[0]["y"] + regions[0]["h"])
    inner = bits.copy()
    inner[:, : x0 + 8], inner[:, x1 - 8:], inner[: y0 + 60], inner[y1 - 8:] = False, False, False, False  # off outline, tag
    ys, xs = np.nonzero(inner)
    expected = 0.4 * original[ys, xs] + 0.6 * np.array([230, 25, 75])  # the first colour blended over the photo
    assert len(ys) > 50 and np.abs(drawn[ys, xs] - expected).max() <= 1
    untouched = np.zeros_like(bits)
    untouched[800:, 1200:] = True  # far from both regions (which lie near the top)
    assert np.array_equal(drawn[untouched], original[untouched]) and tuple(blank[1200, 1600]) == (128, 128, 128)


def test_write_breakdown_draws_on_the_photo_it_is_given_at_the_listed_size_and_says_so(tmp_path):
    photo = Image.new("RGB", (40, 30), (10, 90, 200))
    buffer = io.BytesIO()
    photo.save(buffer, format="PNG")
    lookup = {"sa1b:1": Pixels(buffer.getvalue(), size=(40, 30))}
    write_breakdown(QUESTIONS, REGIONS, tmp_path, lambda i: lookup.get(i, Pixels(None, "missing_file: x")))
    report = json.loads((tmp_path / "breakdown.json").read_text())
    assert [(e["image_id"], e["background"], e["width"], e["height"]) for e in report["examples"]] == [
        ("sa1b:1", "photo", 40, 30)]
    assert tuple(np.asarray(Image.open(tmp_path / "examples" / "comparison-a.png"))[25, 15]) == (10, 90, 200)
    section = "\n".join(breakdown_section(report))
    assert "(2 region(s); 40 x 30, on photo)" in section and "![comparison: Which is larger? x]" in section


def many_questions() -> "pa.Table":
    """40 questions of three task types (ids out of order), some without evidence ids or task type."""
    rows = []
    for i in range(40):
        task = ("comparison", "counting", "attribute", None)[i % 4]
        evidence = ["sa1b:1/g1", "sa1b:1/g2"][: i % 3] if task and i % 5 else None
        rows.append(dict(question_id=f"q{i * 7 % 40:02d}", image_id="sa1b:1", image_source=("sa1b", "vg")[i % 2],
                         question=f"Q{i}?", answer="x", kind="grounded" if task else None, task_type=task,
                         evidence_region_ids=evidence, is_hallucination=True if i % 6 == 0 else None,
                         template_ids=["hallucination:absent_object"] if i % 12 == 0 else None))
    return schemas.from_rows(rows, schemas.QUESTIONS)


def test_the_breakdown_counted_slice_by_slice_is_the_whole_tables(tmp_path):
    import pyarrow as pa

    from reasonvqa.row_views import TableRows
    from reasonvqa.tasks.release.breakdown import BREAKDOWN_COLUMNS, ReleasedQuestions

    table = many_questions()
    train, test = TableRows(table, list(range(39, 9, -1))), TableRows(table, list(range(10)))
    whole = pa.concat_tables([train.select(BREAKDOWN_COLUMNS), test.select(BREAKDOWN_COLUMNS)])
    write_breakdown(whole, REGIONS, tmp_path / "whole")
    sliced = ReleasedQuestions((train, test), rows=3)
    assert [part.num_rows for part in sliced.slices()] == [3] * 10 + [3, 3, 3, 1]
    write_breakdown(sliced, REGIONS, tmp_path / "sliced")
    report = json.loads((tmp_path / "sliced" / "breakdown.json").read_text())
    assert (tmp_path / "sliced" / "breakdown.json").read_bytes() == (tmp_path / "whole" / "breakdown.json").read_bytes()
    assert report["questions"] == 40 and report["task_type"] == {"attribute": 10, "comparison": 10, "counting": 10, "none": 10}
    assert report["hallucination"] == 7 and report["hallucination_form"] == {"absent_object": 4, "unspecified": 3}
    # the two smallest ids with evidence per task type, though the slices hold them out of order
    assert [e["file"] for e in report["examples"]] == ["examples/attribute-q14.png", "examples/attribute-q18.png",
                                                       "examples/comparison-q16.png", "examples/comparison-q24.png",
                                                       "examples/counting-q03.png", "examples/counting-q07.png"]
    pictures = sorted(p.name for p in (tmp_path / "sliced" / "examples").iterdir())
    assert [(tmp_path / "sliced" / "examples" / n).read_bytes() for n in pictures] == \
        [(tmp_path / "whole" / "examples" / n).read_bytes() for n in pictures]


def per_row_breakdown(table, domains: dict[str, str]) -> dict:
    """The breakdown counted one Python row at a time (what the Arrow counts must equal)."""
    from collections import Counter

    from reasonvqa.tasks.release.breakdown import MULTIPLICITY_BINS, hallucination_form

    rows = table.to_pylist()
    value = lambda row, name, default: default if row.get(name) is None else row[name]  # noqa: E731
    bins = Counter(str(n) if n < 5 else "5-9" if n < 10 else "10+"
                   for n in (len(r["evidence_region_ids"]) for r in rows if r.get("evidence_region_ids") is not None))
    domain: dict[str, Counter] = {}
    for r in rows:
        kind = "hallucination" if value(r, "is_hallucination", False) else "other"
        domain.setdefault(domains.get(value(r, "image_source", "unknown"), "unknown"), Counter())[kind] += 1
    halluc = [r for r in rows if value(r, "is_hallucination", False)]
    return {"questions": len(rows),
            "task_type": dict(sorted(Counter(value(r, "task_type", "none") for r in rows).items())),
            "kind": dict(sorted(Counter(value(r, "kind", "template") for r in rows).items())),
            "domain": {d: dict(sorted(c.items())) for d, c in sorted(domain.items())},
            "evidence_multiplicity": {b: bins.get(b, 0) for b in MULTIPLICITY_BINS},
            "hallucination": len(halluc),
            "hallucination_form": dict(sorted(Counter(hallucination_form(r.get("template_ids")) for r in halluc).items())),
            "absence_basis": _ordered(Counter(r.get("absence_basis") or "none" for r in halluc))}


def _ordered(bases) -> dict:
    """Strongest basis first (absence_bases.BASES), "none" last."""
    from reasonvqa.absence_bases import BASES

    return {b: bases[b] for b in [*BASES, "none"] if b in bases}


def test_arrow_counts_equal_the_per_row_counts_with_nulls_bins_and_missing_columns():
    import pyarrow as pa

    rows = [dict(question_id=f"q{i:03d}", image_id=f"vg:{i}", image_source=[None, "vg", "sa1b", "droid"][i % 4],
                 question="Q?", answer="A", kind=[None, "grounded", "template"][i % 3],
                 task_type=[None, "counting", "ocr", "spatial", "attribute"][i % 5],
                 evidence_region_ids=None if i % 7 == 0 else [f"r{j}" for j in range(i % 13)],
                 is_hallucination=[None, True, False][i % 3],
                 template_ids=[["t1"], ["t2", "hallucination:wrong_attribute"], None][i % 3 if i % 2 else 2],
                 absence_basis=[None, "cooccurrence", "review", "taxonomy"][i % 4])
            for i in range(120)]
    table = schemas.from_rows(rows, schemas.QUESTIONS)
    chunked = pa.concat_tables([table.slice(0, 50), table.slice(50)])
    domains = {"vg": "mixed", "sa1b": "indoor/outdoor"}
    for questions in (table, chunked, table.drop_columns(["kind", "is_hallucination", "evidence_region_ids"]),
                      table.slice(0, 0)):
        assert breakdown(questions, domains) == per_row_breakdown(questions, domains)
    report = breakdown(table, domains)
    assert report["evidence_multiplicity"]["10+"] == 24 and report["evidence_multiplicity"]["5-9"] == 38
    assert set(report["hallucination_form"]) == {"wrong_attribute", "unspecified"}
    assert list(report["absence_basis"]) == ["taxonomy", "review", "cooccurrence", "none"]  # strongest first
