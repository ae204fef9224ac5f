import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from reasonvqa import masks
from reasonvqa.annotation_exports.decisions import DecisionStore, StoreError
from reasonvqa.annotation_exports.roundtrip import import_decisions
from tests.annotation_exports.fixtures import masks_by_region
from tests.annotation_exports.helpers import release_and_batch
from tests.annotation_exports.tool_venvs import DATUMARO, tool_python

REALDATA = Path(__file__).parent / "realdata" / "cvat" / "cvat_for_images_1.1_docs_example.xml"


@pytest.fixture
def exported(tmp_path):
    release, store, result = release_and_batch(tmp_path, "cvat")
    return tmp_path, store, result, tmp_path / "batch" / "annotations.xml"


def shapes(root: ET.Element) -> dict[str, ET.Element]:
    return {s.find("attribute[@name='region_id']").text: s for s in root.iter() if s.tag in ("box", "mask")}


def test_export_holds_boxes_masks_and_question_tags_with_our_ids(exported):
    tmp_path, store, result, xml = exported
    root = ET.parse(xml).getroot()
    assert root.findtext("version") == "1.1" and root.findtext("meta/task/name") == result.batch.batch_id
    images = {i.get("name"): i for i in root.findall("image")}
    assert sorted(images) == ["nuscenes/cam1.jpg", "sa1b/1.jpg", "sa1b/2.jpg", "vg/9.jpg"]
    found = shapes(root)
    assert sorted(found) == sorted([*masks_by_region(), "nuscenes:cam1/g1", "nuscenes:cam1/g2"])
    car = found["nuscenes:cam1/g1"]
    assert (car.tag, car.get("label"), car.get("xtl"), car.get("ybr")) == ("box", "car", "2.50", "13.25")
    for region_id, mask in masks_by_region().items():
        s = found[region_id]
        image = next(i for i in root.findall("image") if s in list(i))
        decoded = masks.cvat_decode(s.get("rle"), *(int(s.get(k)) for k in ("left", "top", "width", "height")),
                                    int(image.get("width")), int(image.get("height")))
        assert np.array_equal(decoded, mask), region_id
    tags = {t.find("attribute[@name='question_id']").text: t for t in root.iter("tag")}
    assert sorted(tags) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert tags["q4"].find("attribute[@name='answer']").text == "Berlin"


@pytest.mark.integration
def test_datumaro_loads_the_cvat_export_with_masks_pixel_exact(exported):
    tmp_path, store, result, xml = exported
    for image in ET.parse(xml).getroot().findall("image"):  # datumaro opens each image of the task
        path = xml.parent / "images" / image.get("name")
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (int(image.get("width")), int(image.get("height")))).save(path)
    python = tool_python(DATUMARO)
    script = Path(__file__).parent / "datumaro_reference.py"
    done = subprocess.run([str(python), str(script), "cvat", str(xml.parent)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    items = json.loads(done.stdout)
    assert sorted(items) == ["nuscenes/cam1", "sa1b/1", "sa1b/2", "vg/9"]
    assert items["sa1b/1"]["size"] == [30, 40]
    by_region = {a["attributes"].get("region_id"): a for item in items.values() for a in item["annotations"]}
    car = by_region["nuscenes:cam1/g1"]
    assert car["type"] == "bbox" and car["label"] == "car" and car["bbox"] == pytest.approx([2.5, 3.0, 20.0, 10.25])
    for region_id, mask in masks_by_region().items():
        got = by_region[region_id]
        assert got["type"] == "mask" and got["label"] == "region"
        assert np.array_equal(masks.coco_decode(got["mask"]), mask), region_id
    tags = [a for a in items["nuscenes/cam1"]["annotations"] if a["type"] == "label"]
    assert sorted(t["attributes"]["question_id"] for t in tags) == ["q4", "q5"]


def edit(xml: Path, out: Path, change) -> Path:
    tree = ET.parse(xml)
    change(tree.getroot())
    ET.SubElement(tree.getroot().find("meta"), "dumped").text = "2026-01-07 09:30:00.000000+01:00"
    tree.write(out, encoding="utf-8", xml_declaration=True)
    return out


def set_attribute(shape: ET.Element, name: str, value: str) -> None:
    shape.find(f"attribute[@name='{name}']").text = value


def test_import_reads_decisions_deletions_edits_and_additions(exported):
    tmp_path, store, result, xml = exported

    def change(root):
        found = shapes(root)
        set_attribute(found["sa1b:1/g1"], "decision", "accept")
        set_attribute(found["sa1b:1/g3"], "decision", "reject")
        image2 = next(i for i in root.findall("image") if i.get("name") == "sa1b/2.jpg")
        image2.remove(found["sa1b:2/g2"])  # deleted in CVAT: a reject
        found["nuscenes:cam1/g2"].set("xbr", "40.00")
        grown = masks.cvat_encode(np.pad(np.ones((2, 2), np.uint8), ((0, 28), (0, 38))))
        found["sa1b:1/g2"].attrib.update(rle=grown.rle, width=str(grown.width), height=str(grown.height))
        image1 = next(i for i in root.findall("image") if i.get("name") == "sa1b/1.jpg")
        ET.SubElement(image1, "polygon", label="region", source="manual", occluded="0", points="10,10;20,10;20,20;10,20", z_order="0")
        tags = {t.find("attribute[@name='question_id']").text: t for t in root.iter("tag")}
        set_attribute(tags["q6"], "verdict", "wrong")
        set_attribute(tags["q3"], "answer", "Bern")  # one of its choices
        ET.SubElement(ET.SubElement(root.find("meta/task"), "owner"), "username").text = "ann1"

    changed = edit(xml, tmp_path / "cvat_done.xml", change)
    report = import_decisions(changed, "cvat", store=store)
    assert report.rejects == []
    got = {(d["region_id"] or d["question_id"], d["action"]) for d in report.decisions}
    added = next(d for d in report.decisions if d["action"] == "add")
    assert got == {("sa1b:1/g1", "accept"), ("sa1b:1/g3", "reject"), ("sa1b:2/g2", "reject"),
                   ("nuscenes:cam1/g2", "edit"), ("sa1b:1/g2", "edit"), ("q6", "wrong"), ("q3", "edit_answer"),
                   (added["region_id"], "add")}
    assert added["mask"] is not None and masks.coco_decode(added["mask"])[10:20, 10:20].all()
    box = next(d for d in report.decisions if d["region_id"] == "nuscenes:cam1/g2")
    assert box["box"] == [30.0, 20.0, 10.0, 12.0]
    assert {d["annotator"] for d in report.decisions} == {"cvat:ann1"}
    assert {d["time"] for d in report.decisions} == {"2026-01-07T08:30:00.000000Z"}


def test_bad_cvat_input_is_rejected_per_record(exported):
    tmp_path, store, result, xml = exported

    def change(root):
        found = shapes(root)
        found["sa1b:1/g1"].set("rle", "1, 2, x")
        set_attribute(found["sa1b:1/g2"], "region_id", "sa1b:1/g99")
        images = {i.get("name"): i for i in root.findall("image")}
        images["sa1b/2.jpg"].set("width", "21")
        images["vg/9.jpg"].set("name", "../../etc/passwd")
        images["nuscenes/cam1.jpg"].set("name", "nuscenes/other.jpg")
        tags = {t.find("attribute[@name='question_id']").text: t for t in root.iter("tag")}
        set_attribute(tags["q1"], "answer", "Marseille")  # not one of Paris, Lyon, Nice, Lille

    report = import_decisions(edit(xml, tmp_path / "bad.xml", change), "cvat", store=store, annotator="qa")
    reasons = sorted(r["reason"] for r in report.rejects)
    assert reasons == ["answer_not_a_choice", "file_name_leaves_images_folder", "malformed_rle", "size_mismatch",
                       "unknown_image", "unknown_region_id"]
    assert next(r for r in report.rejects if r["reason"] == "answer_not_a_choice")["detail"] == (
        "answer 'Marseille' is not one of the question's choices ['Paris', 'Lyon', 'Nice', 'Lille']")
    # sa1b:1/g2 was renamed to an unknown id: it is missing, so the annotator deleted it
    assert sorted((d["region_id"], d["action"]) for d in report.decisions) == [("sa1b:1/g2", "reject")]


def test_unreadable_or_foreign_files_change_nothing(exported):
    tmp_path, store, result, xml = exported
    (tmp_path / "broken.xml").write_text("<annotations><version>1.1", encoding="utf-8")
    with pytest.raises(StoreError, match="not XML"):
        import_decisions(tmp_path / "broken.xml", "cvat", store=store)
    with pytest.raises(StoreError, match="which batch"):  # the docs example: none of our images
        import_decisions(REALDATA, "cvat", store=store)
    assert DecisionStore(store).import_files() == []
