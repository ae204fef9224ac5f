"""Project every annotation of a nuScenes-format database to 2D boxes with nuscenes-devkit itself.

Run inside a virtual environment that has nuscenes-devkit (it pins numpy < 2, so not the
project's): ``python nuscenes_devkit_reference.py <dataroot> <version> <out.json>``.
The steps are the devkit's own 2D export (``nuscenes/scripts/export_2d_annotations_as_json.py``,
``get_2d_boxes``): Box from the annotation, world -> ego -> camera with pyquaternion, corners with
z > 0, ``view_points`` with the intrinsic, ``post_process_coords`` against the image size.
Writes ``{"<sample_data token>/<annotation token>": {"box": [x0, y0, x1, y1], "center": [x, y, z]}}``.
The tables are read from a temporary copy next to empty placeholder map rasters: the devkit
checks at load time that every map raster exists (it reads none unless asked for a map mask),
and map rasters play no part in projection.
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from nuscenes.nuscenes import NuScenes
from nuscenes.scripts.export_2d_annotations_as_json import post_process_coords
from nuscenes.utils.geometry_utils import view_points
from pyquaternion import Quaternion


def main(dataroot: str, version: str, out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(Path(dataroot) / version, Path(tmp) / version)
        for record in json.loads((Path(dataroot) / version / "map.json").read_text()):
            placeholder = Path(tmp) / record["filename"]
            placeholder.parent.mkdir(parents=True, exist_ok=True)
            placeholder.touch()
        nusc = NuScenes(version=version, dataroot=tmp, verbose=False)
    boxes = {}
    for sample_data in nusc.sample_data:
        if not sample_data["is_key_frame"] or sample_data["sensor_modality"] != "camera":
            continue
        calibrated = nusc.get("calibrated_sensor", sample_data["calibrated_sensor_token"])
        pose = nusc.get("ego_pose", sample_data["ego_pose_token"])
        intrinsic = np.array(calibrated["camera_intrinsic"])
        sample = nusc.get("sample", sample_data["sample_token"])
        for ann_token in sample["anns"]:
            box = nusc.get_box(ann_token)
            box.translate(-np.array(pose["translation"]))
            box.rotate(Quaternion(pose["rotation"]).inverse)
            box.translate(-np.array(calibrated["translation"]))
            box.rotate(Quaternion(calibrated["rotation"]).inverse)
            corners = box.corners()
            in_front = np.argwhere(corners[2, :] > 0).flatten()
            if len(in_front) == 0:
                continue
            coords = view_points(corners[:, in_front], intrinsic, True).T[:, :2].tolist()
            final = post_process_coords(coords, imsize=(sample_data["width"], sample_data["height"]))
            if final is None:
                continue
            boxes[f"{sample_data['token']}/{ann_token}"] = {"box": [float(v) for v in final],
                                                            "center": [float(v) for v in box.center]}
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(boxes, handle, sort_keys=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
