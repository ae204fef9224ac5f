"""COCO instances files -> the COCO categories of the Visual Genome images that carry a coco_id (literal files in
COCO's and VG's formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from reasonvqa.snapshot import folder_snapshot_id
from reasonvqa.sources import get
from reasonvqa.tasks.sources.coco_instances import coco_categories, coco_taxonomy_table, write_coco_taxonomy

CATEGORIES = [{"supercategory": "person", "id": 1, "name": "person"},
              {"supercategory": "kitchen", "id": 47, "name": "cup"},
              {"supercategory": "food", "id": 56, "name": "broccoli"},
              {"supercategory": "furniture", "id": 67, "name": "dining table"},
              {"supercategory": "appliance", "id": 80, "name": "toaster"}]  # toaster: no annotation anywhere


def image(coco_id: int) -> dict:
    return {"license": 3, "file_name": f"COCO_train2014_{coco_id:012d}.jpg", "coco_url": "", "height": 480, "width": 640,
            "date_captured": "2013-11-14 16:28:13", "flickr_url": "", "id": coco_id}


def annotation(ann_id: int, coco_id: int, category: int, crowd: int = 0) -> dict:
    segmentation = ({"counts": [272, 2, 4, 4, 4, 4, 2, 9], "size": [480, 640]} if crowd
                    else [[239.97, 260.24, 222.04, 270.49, 199.84, 253.41, 213.5, 227.79]])
    return {"segmentation": segmentation, "area": 2765.1486, "iscrowd": crowd, "image_id": coco_id,
            "bbox": [199.84, 200.46, 77.71, 70.88], "category_id": category, "id": ann_id}


TRAIN = {"info": {"description": "COCO 2014 Dataset", "version": "1.0", "year": 2014}, "licenses": [],
         "images": [image(9), image(25)],
         "annotations": [annotation(1, 9, 56), annotation(2, 9, 67), annotation(3, 9, 56),
                         annotation(4, 25, 1, crowd=1)],  # a crowd of people: the person category is there
         "categories": CATEGORIES}
VAL = {"info": {}, "licenses": [], "images": [image(30)], "annotations": [], "categories": CATEGORIES}  # 30: none
# Visual Genome image_data.json rows: coco_id null for most images
IMAGE_DATA = [{"width": 800, "url": "https://cs.stanford.edu/people/rak248/VG_100K_2/1.jpg", "height": 600,
               "image_id": 1, "coco_id": None, "flickr_id": None},
              {"width": 640, "url": "", "height": 480, "image_id": 2, "coco_id": 9, "flickr_id": 1},
              {"width": 640, "url": "", "height": 480, "image_id": 3, "coco_id": 25, "flickr_id": None},
              {"width": 640, "url": "", "height": 480, "image_id": 4, "coco_id": 30, "flickr_id": None},
              {"width": 640, "url": "", "height": 480, "image_id": 5, "coco_id": 999, "flickr_id": None},
              {"width": 640, "url": "", "height": 480, "image_id": 6, "coco_id": 25, "flickr_id": None}]  # 25 again


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, list[Path]]:
    vg = tmp_path / "vg"
    vg.mkdir()
    (vg / "image_data.json").write_text(json.dumps(IMAGE_DATA))
    (vg / "objects.json").write_text("[]")
    (tmp_path / "instances_train2014.json").write_text(json.dumps(TRAIN))
    (tmp_path / "instances_val2014.json").write_text(json.dumps(VAL))
    return vg, [tmp_path / "instances_train2014.json", tmp_path / "instances_val2014.json"]


def test_each_vg_image_found_in_the_coco_files_gets_its_category_set(files):
    vg, instances = files
    table = coco_taxonomy_table(vg / "image_data.json", instances)
    # vg:1 has no coco_id, vg:5's coco_id 999 is in neither file: no row, they keep the other bases
    assert table.to_pylist() == [{"image_id": "vg:2", "coco_id": 9, "category_ids": [56, 67]},
                                 {"image_id": "vg:3", "coco_id": 25, "category_ids": [1]},
                                 {"image_id": "vg:4", "coco_id": 30, "category_ids": []},
                                 {"image_id": "vg:6", "coco_id": 25, "category_ids": [1]}]
    # max_images keeps the first rows of image_data.json, as the reader does
    assert coco_taxonomy_table(vg / "image_data.json", instances, max_images=2)["image_id"].to_pylist() == ["vg:2"]


def test_only_the_wanted_coco_images_are_kept(files):
    _, instances = files
    assert coco_categories(instances, {25, 30, 12345}) == {25: {1}, 30: set()}


def test_the_vg_config_names_coco_files_and_the_flow_writes_their_table(files, tmp_path):
    vg, instances = files
    source = get("vg")
    config = source.config_model.model_validate({"kind": "vg", "path": str(vg), "coco_instances": [str(p) for p in instances]})
    source.check(config)
    assert write_coco_taxonomy([config], tmp_path / "coco.parquet") == tmp_path / "coco.parquet"
    assert pq.read_table(tmp_path / "coco.parquet")["image_id"].to_pylist() == ["vg:2", "vg:3", "vg:4", "vg:6"]
    # a rerun of the same build (same work folder) keeps the table it wrote
    written = (tmp_path / "coco.parquet").stat().st_mtime_ns
    assert write_coco_taxonomy([config], tmp_path / "coco.parquet") == tmp_path / "coco.parquet"
    assert (tmp_path / "coco.parquet").stat().st_mtime_ns == written
    # without the option: nothing is written, and the config dumps as before the option existed
    plain = source.config_model.model_validate({"kind": "vg", "path": str(vg)})
    assert write_coco_taxonomy([plain], tmp_path / "none.parquet") is None and not (tmp_path / "none.parquet").exists()
    assert "coco_instances" not in plain.model_dump()
    # the snapshot (the build's input id) follows the COCO files too
    before = source.snapshot(config)
    instances[1].write_text(json.dumps(VAL | {"images": []}))
    assert source.snapshot(config) != before
    assert source.snapshot(plain) == folder_snapshot_id(vg, recursive=False)  # as before the option existed
    missing = config.model_copy(update={"coco_instances": [tmp_path / "instances_val2017.json"]})
    with pytest.raises(FileNotFoundError, match="instances_val2017.json"):
        source.check(missing)


def test_a_broken_instances_file_is_named_in_the_error(tmp_path):
    broken = tmp_path / "instances_val2014.json"
    broken.write_text('{"images": [{"id": 9}], "annotations": [{"image_id": 9, "category_id": ')
    with pytest.raises(ValueError, match="instances_val2014.json: not a readable COCO instances file"):
        coco_categories([broken], {9})
