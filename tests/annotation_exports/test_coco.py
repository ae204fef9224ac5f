import numpy as np
from pycocotools.coco import COCO

from tests.annotation_exports.fixtures import masks_by_region
from tests.annotation_exports.helpers import release_and_batch


def test_pycocotools_loads_the_export_and_gives_back_every_mask(tmp_path):
    release, store, result = release_and_batch(tmp_path, "coco")
    coco = COCO(str(tmp_path / "batch" / "instances.json"))
    assert sorted(img["file_name"] for img in coco.loadImgs(coco.getImgIds())) == [
        "nuscenes/cam1.jpg", "sa1b/1.jpg", "sa1b/2.jpg", "vg/9.jpg"]
    assert sorted(c["name"] for c in coco.loadCats(coco.getCatIds())) == ["car", "pedestrian", "region"]
    anns = {a["reasonvqa_region_id"]: a for a in coco.loadAnns(coco.getAnnIds())}
    assert len(anns) == 7
    for region_id, mask in masks_by_region().items():
        ann = anns[region_id]
        assert np.array_equal(coco.annToMask(ann), mask), region_id
        assert ann["area"] == mask.sum()
    car = anns["nuscenes:cam1/g1"]
    assert car["bbox"] == [2.5, 3.0, 20.0, 10.25] and coco.loadCats(car["category_id"])[0]["name"] == "car"
    assert coco.annToMask(car)[5:13, 3:22].all()  # the box polygon rasterizes inside the box
    items = coco.dataset["reasonvqa"]["items"]
    assert [i["question_id"] for i in items] == ["q1", "q2", "q3", "q4", "q5", "q6"]
