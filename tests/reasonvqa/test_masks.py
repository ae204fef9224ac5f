"""The mask module: COCO RLE (compressed and uncompressed), Label Studio brush RLE, CVAT 1.1 RLE and
polygons, on real files of each format and on masks that touch every border."""

import json
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from reasonvqa import masks
from reasonvqa.paths import SAMPLE_DIR
from tests.annotation_exports.fixtures import blob, border_mask, one_pixel

REALDATA = Path(__file__).parents[1] / "annotation_exports" / "realdata"
LS = REALDATA / "labelstudio"
CVAT = REALDATA / "cvat" / "cvat_for_images_1.1_docs_example.xml"


def sa1b_annotations() -> tuple[dict, list[dict]]:
    """The bundled SA-1B sample's image record and its 12 annotations (compressed COCO RLE, 2000x1500)."""
    with tarfile.open(SAMPLE_DIR / "sa1b" / "sa_000020.tar") as tar:
        doc = json.loads(tar.extractfile("sa_226381.json").read())
    return doc["image"], doc["annotations"]


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two same-size 0/1 masks, counted on pixels (0 when both are empty)."""
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b)) / union if union else 0.0


# --- COCO RLE on the formats' own examples ----------------------------------------------------

def test_uncompressed_rle_of_the_iscrowd_form_decodes_column_major_and_compresses():
    # COCO's uncompressed RLE: run lengths over the column-major pixels, background first
    rle = {"size": [3, 4], "counts": [1, 2, 3, 6]}
    expected = np.array([[0, 0, 1, 1], [1, 0, 1, 1], [1, 0, 1, 1]], np.uint8)
    assert masks.coco_decode(rle).tolist() == expected.tolist()
    # compressed: one character per run below 16; the fourth run (6) is written as 6 - 2 = "4"
    assert masks.coco_encode(expected) == {"size": [3, 4], "counts": "1234"}
    assert masks.coco_decode({"size": [3, 4], "counts": "1234"}).tolist() == expected.tolist()
    assert masks.coco_decode({"size": [3, 4], "counts": b"1234"}).tolist() == expected.tolist()
    assert masks.coco_area(rle) == masks.coco_area({"size": [3, 4], "counts": "1234"}) == 8
    assert masks.coco_area_and_box({"size": [3, 4], "counts": "1234"}) == (8.0, [0.0, 0.0, 4.0, 3.0])


def test_real_sa1b_masks_decode_to_their_area_and_encode_back_to_the_same_string():
    image, annotations = sa1b_annotations()
    rles = [a["segmentation"] for a in annotations]
    assert [r["size"] for r in rles] == [[image["height"], image["width"]]] * 12
    areas = [a["area"] for a in annotations]
    assert masks.coco_areas(rles).tolist() == [float(a) for a in areas]
    assert [masks.coco_area(r) for r in rles] == areas
    for annotation, rle in zip(annotations[:4], rles):
        mask = masks.coco_decode(rle)
        assert mask.shape == (1500, 2000) and int(mask.sum()) == annotation["area"]
        assert masks.coco_encode(mask) == rle  # pycocotools writes one string per mask
        area, box = masks.coco_area_and_box(rle)
        x, y, w, h = annotation["bbox"]  # SA-1B's bbox is 1 px narrower and shorter than toBbox (FIELD_NOTES)
        assert (area, box) == (float(annotation["area"]), [x, y, w + 1, h + 1])
        assert masks.labelstudio_encode_coco(rle) == masks.labelstudio_encode_bytes(mask)
        assert masks.cvat_encode_coco(rle) == masks.cvat_encode(mask)


def test_sa1b_counts_with_backslashes_read_as_pycocotools_reads_them():
    _, annotations = sa1b_annotations()
    with_backslash = [a for a in annotations if "\\" in a["segmentation"]["counts"]]
    assert with_backslash  # the JSON-escaped backslash is a run character like any other
    for a in with_backslash:
        assert int(masks.coco_decode(a["segmentation"]).sum()) == masks.coco_area(a["segmentation"]) == a["area"]


def test_a_stack_of_more_than_255_masks_encodes_in_one_call_each_255():
    stack = np.zeros((300, 5, 7), dtype=bool)
    for i in range(300):
        stack[i].flat[i % 35] = True  # one pixel each, at row-major index 0, 1, ... of its 5x7 image
    rles = masks.coco_encode_stack(stack)
    # mask 0: runs [0, 1, 34]; 34 = 2 + 1 * 32 is "R" (48 + 2 + the continuation bit 32), then "1"
    assert len(rles) == 300 and rles[0] == {"size": [5, 7], "counts": "01R1"} and rles[1] == masks.coco_encode(stack[1])
    assert all(isinstance(r["counts"], str) for r in rles)
    assert masks.coco_areas(rles).tolist() == [1.0] * 300
    assert all(np.array_equal(masks.coco_decode(r), m) for r, m in zip(rles, stack))
    assert masks.coco_encode_stack(np.zeros((0, 5, 7), bool)) == []
    with pytest.raises(ValueError, match="N, H, W"):
        masks.coco_encode_stack(np.zeros((5, 7), bool))


def column_major_changes(stack: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each mask's column-major scan changes value, found on the pixels (the reference)."""
    flat = stack.transpose(0, 2, 1).reshape(len(stack), -1)
    owner, position = np.nonzero(flat[:, 1:] != flat[:, :-1])
    return owner, position + 1, flat[:, 0]


def test_rles_from_run_changes_equal_pycocotools_strings_and_areas():
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:240, 0:320]
    blobs = np.stack([(x - rng.uniform(0, 320)) ** 2 + (y - rng.uniform(0, 240)) ** 2 < rng.uniform(3, 200) ** 2
                      for _ in range(40)])
    noise = rng.random((6, 9, 13)) < 0.5  # runs of 1 and long runs: differences to the run two before go negative
    edges = np.zeros((5, 4, 3), bool)
    edges[1] = True  # all inside: an empty first run, then one run
    edges[2, 0, 0] = True  # the first pixel only
    edges[3, -1, -1] = True  # the last pixel only
    edges[4, :, 1] = True  # a whole column
    for stack in (blobs, noise, edges, np.zeros((3, 1, 1), bool), np.ones((2, 1, 1), bool)):
        expected = masks.coco_encode_stack(stack)
        rles, areas = masks.coco_encode_changes(*column_major_changes(stack), *stack.shape[1:])
        assert rles == expected
        assert areas.tolist() == masks.coco_areas(expected).tolist() == stack.sum(axis=(1, 2)).tolist()
    assert masks.coco_encode_changes(np.zeros(0), np.zeros(0), np.zeros(0, bool), 4, 5)[0] == []


def test_non_binary_masks_encode_as_their_non_zero_pixels():
    mask = np.array([[0, 255], [7, 0]], np.uint8)
    assert masks.coco_encode(mask) == masks.coco_encode(mask != 0) == {"size": [2, 2], "counts": "121"}  # column-major: 0, 7, 255, 0


@pytest.mark.parametrize("rle, message", [
    ({"size": [0, 4], "counts": "abc"}, "empty"),
    ({"size": [3, 4], "counts": "\u00e9"}, "not runs"),
    ({"size": [3, 4], "counts": "1233"}, "sum to 11, not 3x4"),
    ({"size": [3, 4], "counts": [1, 2, 3]}, "sum to 6"),
    ({"size": [3, 4], "counts": [13, -1]}, "not runs"),
    ({"size": [3, 4], "counts": 17}, "not runs"),
    ({"counts": "1234"}, "size and counts"),
])
def test_coco_area_rejects_what_is_not_a_coco_rle_of_its_size(rle, message):
    with pytest.raises(masks.MaskError, match=message):
        masks.coco_area(rle)


def test_polygon_is_rasterized_as_coco_does():
    square = masks.polygon_mask([1, 1, 4, 1, 4, 3, 1, 3], 5, 6)
    assert square.tolist() == [[0, 0, 0, 0, 0, 0], [0, 1, 1, 1, 0, 0], [0, 1, 1, 1, 0, 0],
                               [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]
    with pytest.raises(masks.MaskError, match="three x,y points"):
        masks.polygon_mask([1, 1, 4, 1], 5, 6)


# --- COCO <-> Label Studio <-> CVAT -----------------------------------------------------------

def cases() -> dict[str, np.ndarray]:
    out = {
        "border": border_mask(),
        "full image": np.ones((7, 5), np.uint8),
        "one pixel 1x1 image": np.ones((1, 1), np.uint8),
        "blob": blob(33, 17, seed=1),
        "one column at the right border": np.pad(np.ones((9, 1), np.uint8), ((0, 0), (12, 0))),
    }
    for row, col in [(0, 0), (0, 39), (29, 0), (29, 39), (14, 20)]:
        out[f"one pixel at {row},{col}"] = one_pixel(40, 30, row, col)
    return out


@pytest.mark.parametrize("name", sorted(cases()))
def test_coco_labelstudio_coco_is_pixel_exact(name):
    mask = cases()[name]
    rle = masks.coco_encode(mask)
    height, width = mask.shape
    back = masks.labelstudio_decode(masks.labelstudio_encode(masks.coco_decode(rle)), width, height)
    assert np.array_equal(back, mask)
    assert masks.coco_encode(back) == rle


@pytest.mark.parametrize("name", sorted(cases()))
def test_coco_cvat_coco_is_pixel_exact(name):
    mask = cases()[name]
    rle = masks.coco_encode(mask)
    height, width = mask.shape
    cvat = masks.cvat_encode(masks.coco_decode(rle))
    runs = [int(v) for v in cvat.rle.split(", ")]
    assert sum(runs) == cvat.width * cvat.height
    back = masks.cvat_decode(cvat.rle, cvat.left, cvat.top, cvat.width, cvat.height, width, height)
    assert np.array_equal(back, mask)
    assert masks.coco_encode(back) == rle


def test_one_pixel_masks_have_one_pixel_boxes_in_cvat():
    cvat = masks.cvat_encode(one_pixel(40, 30, 29, 39))
    assert (cvat.rle, cvat.left, cvat.top, cvat.width, cvat.height) == ("0, 1", 39, 29, 1, 1)
    assert masks.cvat_encode(np.zeros((3, 3), np.uint8)) is None


def test_brush_codec_known_answer_from_label_studio_sdk():
    known = json.loads((LS / "brush_rle_known_answer.json").read_text())
    assert masks.labelstudio_encode_values(np.array(known["pixels"])) == known["rle"]
    assert masks.labelstudio_decode_values(known["rle"]).tolist() == known["pixels"]


def test_real_yolo_brush_predictions_decode_and_round_trip():
    task = json.loads((LS / "prediction_brushlabels_yolo.json").read_text())[0]
    results = task["result"]
    assert len(results) == 3
    for result in results:
        width, height = result["original_width"], result["original_height"]
        mask = masks.labelstudio_decode(result["value"]["rle"], width, height)
        assert mask.shape == (576, 768) and 500 < mask.sum() < 576 * 768 // 4  # a person, not the frame
        assert np.array_equal(masks.labelstudio_decode(masks.labelstudio_encode(mask), width, height), mask)
        assert np.array_equal(masks.coco_decode(masks.coco_encode(mask)), mask)


def test_real_cvat_docs_mask_decodes_and_encodes_back_to_the_same_runs():
    root = ET.parse(CVAT).getroot()
    image = root.find("image")
    shape = image.find("mask")
    left, top, width, height = (int(shape.get(k)) for k in ("left", "top", "width", "height"))
    full = masks.cvat_decode(shape.get("rle"), left, top, width, height, int(image.get("width")), int(image.get("height")))
    assert full.shape == (1200, 1600) and full.sum() == sum(int(v) for v in shape.get("rle").split(", ")[1::2])
    again = masks.cvat_encode(full)
    assert (again.rle, again.left, again.top, again.width, again.height) == (shape.get("rle"), left, top, width, height)


def test_bad_masks_raise_mask_error():
    good = masks.labelstudio_encode(one_pixel(4, 3, 1, 1))
    with pytest.raises(masks.MaskError, match="RGBA image of 5x3"):
        masks.labelstudio_decode(good, 5, 3)  # made for a 4x3 image
    with pytest.raises(masks.MaskError):
        masks.labelstudio_decode(good[:6], 4, 3)  # bit stream cut short
    with pytest.raises(masks.MaskError):
        masks.labelstudio_decode("not a list", 4, 3)
    with pytest.raises(masks.MaskError, match="sum to 5"):
        masks.cvat_decode("2, 3", 0, 0, 2, 3, 10, 10)
    with pytest.raises(masks.MaskError, match="leaves"):
        masks.cvat_decode("0, 4", 9, 9, 2, 2, 10, 10)
    with pytest.raises(masks.MaskError, match="whole numbers"):
        masks.cvat_decode("1, x", 0, 0, 1, 2, 10, 10)
    with pytest.raises(masks.MaskError):
        masks.coco_decode({"size": [3, 3], "counts": 17})


def random_masks() -> list[np.ndarray]:
    """Masks of every density on thin, square and wide images, plus the named cases and an empty mask."""
    rng = np.random.default_rng(11)
    out = list(cases().values()) + [np.zeros((6, 4), np.uint8)]
    for height, width in [(1, 9), (9, 1), (3, 3), (17, 5), (48, 64), (2, 700)]:
        for density in (0.01, 0.3, 0.5, 0.9, 1.0):
            out.append((rng.random((height, width)) < density).astype(np.uint8))
        block = np.zeros((height, width), np.uint8)
        block[height // 2:, width // 3:] = 1  # touches the bottom and right borders
        out.append(block)
    return out


def test_encoders_from_coco_runs_match_the_raster_encoders():
    for mask in random_masks():
        rle = masks.coco_encode(mask)
        assert masks.labelstudio_encode_coco(rle) == bytes(masks.labelstudio_encode(mask)), mask.shape
        assert masks.cvat_encode_coco(rle) == masks.cvat_encode(mask), mask.shape


def test_iou_on_runs_matches_iou_on_pixels():
    shapes = random_masks()
    pairs = [(a, b) for a, b in zip(shapes, shapes[1:]) if a.shape == b.shape] + [(m, m) for m in shapes[:5]]
    for a, b in pairs:
        expected = mask_iou(a.astype(bool), b.astype(bool))
        assert masks.rle_iou(masks.coco_encode(a), masks.coco_encode(b)) == expected


def outcome(encode, rle):
    try:
        return encode(rle)
    except masks.MaskError:
        return "MaskError"


@pytest.mark.parametrize("counts", ["\x01\x02", "0", "", "PPPPPPPP", "o", "<\u00e9", [5], [12], [-1, 13]])
def test_malformed_coco_rle_gives_what_the_raster_path_gives(counts):
    rle = {"size": [3, 4], "counts": counts}
    assert outcome(masks.labelstudio_encode_coco, rle) == outcome(lambda r: masks.labelstudio_encode_bytes(masks.coco_decode(r)), rle)
    assert outcome(masks.cvat_encode_coco, rle) == outcome(lambda r: masks.cvat_encode(masks.coco_decode(r)), rle)
    assert outcome(masks.cvat_encode_coco, {"size": [3, 4], "counts": [12]}) is None  # all background


def test_coco_problems_agrees_with_coco_area_on_valid_and_garbage_rles():
    """The vectorized check of many RLEs at once refuses exactly what the one-mask check refuses."""
    rng = np.random.default_rng(0)
    valid = [masks.coco_encode((rng.random((h, w)) < rng.random()).astype(np.uint8))
             for h, w in rng.integers(1, 40, size=(200, 2))]
    alphabet = [chr(c) for c in range(40, 130)]
    garbage = [{"size": [int(h), int(w)], "counts": "".join(rng.choice(alphabet, int(n)))}
               for h, w, n in rng.integers(1, 6, size=(2000, 3))]
    odd = [{"size": [4, 10], "counts": "zz"}, {"size": [4, 10], "counts": ""}, {"size": [4, 5], "counts": [5, 2, 2, 2, 2, 2, 5]},
           {"x": 1}, "not a mask", {"size": [2, 2], "counts": "0\x7f"}, {"size": [2, 2], "counts": "4"},
           {"size": [2, 2], "counts": "1" + "O" * 8 + "0"}, {"size": [4, 10], "counts": "0P"}]
    rles = [r for pair in zip(valid, garbage) for r in pair] + garbage[200:] + odd
    found = masks.coco_problems(rles)
    for rle, problem in zip(rles, found):
        try:
            masks.coco_area(rle)  # type: ignore[arg-type]
            refused = False
        except (masks.MaskError, TypeError):
            refused = True
        assert (problem is not None) == refused, (rle, problem)
    assert all(p is None for p in found[:400:2])  # every encoded mask passes
    assert found[-3] is None and found[-2] is not None  # "4" covers 2 x 2; an open number does not
    assert sum(p is None for p in found) > 200  # some garbage is a valid RLE too
