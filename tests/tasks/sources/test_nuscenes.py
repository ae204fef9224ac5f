import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from reasonvqa import sources
from reasonvqa.paths import SAMPLE_DIR
from reasonvqa.tasks.sources.box_projection import image_boxes, quaternion_matrix
from reasonvqa.tasks.sources.nuscenes import NuScenesConfig, NuScenesSource

from tests.tasks.sources.conftest import rejects_by_reason, rows
from tests.tasks.sources.source_runner import run_source, table_counts
from tests.tool_cache import NUSCENES_DEVKIT, tool_python

SAMPLE = SAMPLE_DIR / "nuscenes"  # Lyft Level 5 tables in the nuScenes format (join-consistent)
V10_EXCERPT = Path(__file__).parent / "data" / "nuscenes_v1.0_excerpt"  # real v1.0-mini rows, not join-consistent
DEVKIT = NUSCENES_DEVKIT


def config(path, **options) -> NuScenesConfig:
    return NuScenesConfig(kind="nuscenes", path=path, **options)


def copy_tables(tmp_path: Path) -> Path:
    root = tmp_path / "nuscenes"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns("*.md", "LICENSE*"))
    return root


def edit_table(root: Path, table: str, edit) -> None:
    path = root / "v1.01-train" / f"{table}.json"
    rows_ = json.loads(path.read_text())
    path.write_text(json.dumps(edit(rows_)))


def test_registered_under_its_kind():
    assert isinstance(sources.get("nuscenes"), NuScenesSource)


def test_quaternion_matrix_matches_a_known_rotation():
    half = np.sqrt(0.5)  # 90 degrees about z
    assert np.allclose(quaternion_matrix([half, 0, 0, half]), [[0, -1, 0], [1, 0, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match="zero"):
        quaternion_matrix([0, 0, 0, 0])


def test_image_boxes_clip_to_the_image_and_drop_boxes_behind():
    intrinsic = np.array([[100.0, 0, 50], [0, 100, 50], [0, 0, 1]])
    cube = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (4, 6)], dtype=float)
    boxes = image_boxes(np.stack([cube, cube + [3, 0, 0], cube - [0, 0, 10]]), intrinsic, 100, 100)
    assert np.allclose(boxes[0], [25, 25, 75, 75])  # inside: projected corner bounds
    assert np.allclose(boxes[1], [50 + 100 * 2 / 6, 25, 100, 75])  # right part clipped at the image edge
    assert np.isnan(boxes[2]).all()  # every corner behind the camera


def test_sample_tables_give_camera_keyframes_with_projected_regions(tmp_path):
    stage = tmp_path / "stage"
    stats = run_source(NuScenesSource(), config(SAMPLE), stage)
    # 7 cameras, 3 lidars; the 4 cars give 6 regions (one is seen by two cameras)
    assert table_counts(stage) == {"images": 7, "regions": 6, "objects": 6, "shards": 1, "rejected": {}}
    assert stats[0]["non_camera_keyframes"] == 3 and stats[0]["scene"].startswith("host-a101")
    images = {r["image_id"]: r for r in rows(stage, "images")}
    front = images["nuscenes:ff8dc9f62a36f159eb30e9c62eae7bdf4726cf9c91587ceb0314400e74e89438"]
    assert (front["width"], front["height"], front["visual_domain"]) == (1920, 1080, "driving")
    assert front["file_path"] == "images/host-a101_cam0_1240710385850000006.jpeg"
    assert front["context"] is None  # the Lyft scene description is empty
    assert front["group_id"] == "host-a101-lidar0-1240710366399037786-1240710391298976894"
    regions = rows(stage, "regions")
    assert regions and all(r["label"] == "car" and r["origin"] == "annotation:nuscenes" for r in regions)
    assert all(r["attributes"] == ["object_action_driving_straight_forward"] and r["visibility"] is None for r in regions)
    for r in regions:
        image = images[r["image_id"]]
        assert 0 <= r["x"] and r["x"] + r["w"] <= image["width"] + 1e-9
        assert 0 <= r["y"] and r["y"] + r["h"] <= image["height"] + 1e-9
        assert r["center_3d"][2] > 0 or json.loads(r["extra"])["corners_in_front"] < 8
    objects = rows(stage, "objects")
    assert sorted(o["object_id"].replace("/o", "/g") for o in objects) == sorted(r["region_id"] for r in regions)
    assert stats[0]["rows_in"] == 7 + 4 and stats[0]["rows_in"] == stats[0]["rows_out"] + sum(stats[0]["rejected"].values())


def devkit_python() -> Path:
    """A virtual environment with nuscenes-devkit, made once and kept in the test cache (tests/tool_cache.py)."""
    return tool_python(DEVKIT, timeout=1200)


def add_boxes_around_the_car(root: Path, count: int = 300) -> None:
    """Add seeded boxes all around the ego vehicle: many cut by image edges or partly behind a camera."""
    rng = np.random.default_rng(7)
    ego = json.loads((root / "v1.01-train" / "ego_pose.json").read_text())[0]["translation"]

    def add(rows_):
        template = rows_[0]
        for i in range(count):
            yaw = rng.uniform(-np.pi, np.pi)
            offset = [rng.uniform(-25, 25), rng.uniform(-25, 25), rng.uniform(-2, 2)]
            rows_.append({**template, "token": f"{i:064x}", "translation": [e + o for e, o in zip(ego, offset)],
                          "size": [float(v) for v in rng.uniform(0.5, 6.0, 3)],
                          "rotation": [float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2))]})
        return rows_

    edit_table(root, "sample_annotation", add)


@pytest.mark.integration
@pytest.mark.parametrize("tables", ["real", "dense"])
def test_projection_agrees_with_nuscenes_devkit(tmp_path, tables):
    root = copy_tables(tmp_path)
    if tables == "dense":
        add_boxes_around_the_car(root)
    reference = tmp_path / "devkit_boxes.json"
    subprocess.run([str(devkit_python()), str(Path(__file__).parent / "nuscenes_devkit_reference.py"),
                    str(root), "v1.01-train", str(reference)], check=True, timeout=300)
    expected = json.loads(reference.read_text())
    stage = tmp_path / "stage"
    run_source(NuScenesSource(), config(root), stage)
    ours = {r["region_id"].removeprefix("nuscenes:").replace("/g", "/"): r for r in rows(stage, "regions")}
    assert len(expected) == (6 if tables == "real" else len(expected)) and len(expected) > 0
    assert sorted(ours) == sorted(expected)
    for key, want in expected.items():
        r = ours[key]
        corners = [r["x"], r["y"], r["x"] + r["w"], r["y"] + r["h"]]
        assert np.abs(np.array(corners) - want["box"]).max() <= 0.5, key
        assert np.allclose(r["center_3d"], want["center"], atol=1e-6), key


def test_real_v10_excerpt_rows_pointing_at_missing_samples_are_rejected(tmp_path):
    stage = tmp_path / "stage"
    stats = run_source(NuScenesSource(), config(V10_EXCERPT), stage)
    assert table_counts(stage) == {"images": 0, "regions": 0, "objects": 0, "shards": 3,
                                   "rejected": {"nuscenes_missing_token:sample": 2}}
    assert rejects_by_reason(stage)["nuscenes_missing_token:sample"] == [
        "sample_annotation.json#70aecbe9b64f4722ab3c230391a3beb8", "sample_annotation.json#7fa3a688931b4500b7ce29d187d3b975"]
    assert [s["scene"] for s in stats] == ["scene-0061", "scene-0103", None]
    assert stats[0]["non_camera_keyframes"] == 1  # the RADAR_FRONT keyframe of scene-0061's first sample


def test_rows_pointing_at_missing_tokens_are_rejected(tmp_path):
    root = copy_tables(tmp_path)
    cam_front = "ff8dc9f62a36f159eb30e9c62eae7bdf4726cf9c91587ceb0314400e74e89438"
    cam_back = "6054a1290da34bd91facc51ce2aea34bd9c575dc442cf4123ffc54d593ee89e1"

    def break_sample_data(rows_):
        for row in rows_:
            if row["token"] == cam_front:
                row["ego_pose_token"] = "f" * 64
            if row["token"] == cam_back:
                row["calibrated_sensor_token"] = "e" * 64
        return rows_

    def break_annotations(rows_):
        rows_[0]["instance_token"] = "0" * 64
        rows_[1]["attribute_tokens"] = ["1" * 64]
        rows_[2]["visibility_token"] = "9"
        rows_[3]["size"] = [0.0, 4.5, 1.8]
        return rows_

    def add_orphan_sample(rows_):
        return rows_ + [{**rows_[0], "token": "a" * 64, "scene_token": "b" * 64}]

    edit_table(root, "sample_data", break_sample_data)
    edit_table(root, "sample_annotation", break_annotations)
    edit_table(root, "sample", add_orphan_sample)
    edit_table(root, "sample_annotation", lambda r: r + [{**r[3], "token": "c" * 64, "sample_token": "a" * 64,
                                                             "size": [2.0, 4.5, 1.8]}])
    stage = tmp_path / "stage"
    stats = run_source(NuScenesSource(), config(root), stage)
    assert table_counts(stage)["rejected"] == {
        "nuscenes_box_invalid": 1, "nuscenes_missing_token:attribute": 1,
        "nuscenes_missing_token:calibrated_sensor": 1, "nuscenes_missing_token:ego_pose": 1,
        "nuscenes_missing_token:instance": 1, "nuscenes_missing_token:scene": 1,
        "nuscenes_missing_token:visibility": 1,
    }
    assert rejects_by_reason(stage)["nuscenes_missing_token:ego_pose"] == [f"sample_data.json#{cam_front}"]
    assert rejects_by_reason(stage)["nuscenes_missing_token:scene"] == [f"sample_annotation.json#{'c' * 64}"]
    assert table_counts(stage)["images"] == 5 and table_counts(stage)["regions"] == 0
    for s in stats:
        assert s["rows_in"] == s["rows_out"] + sum(s["rejected"].values())


def test_camera_selection_and_version_detection(tmp_path):
    stage = tmp_path / "stage"
    run_source(NuScenesSource(), config(SAMPLE, cameras=["CAM_FRONT"], version="v1.01-train"), stage)
    assert [r["file_path"] for r in rows(stage, "images")] == ["images/host-a101_cam0_1240710385850000006.jpeg"]
    with pytest.raises(FileNotFoundError, match="v9"):
        NuScenesSource().check(config(SAMPLE, version="v9"))
    with pytest.raises(FileNotFoundError, match="expected one nuScenes version folder"):
        NuScenesSource().check(config(tmp_path))


def test_scene_description_is_the_image_context(tmp_path):
    root = copy_tables(tmp_path)
    description = "Parked truck, construction, intersection, turn left, following a van"  # scene-0061's
    edit_table(root, "scene", lambda rows_: [{**rows_[0], "description": description}])
    stage = tmp_path / "stage"
    run_source(NuScenesSource(), config(root), stage)
    assert {r["context"] for r in rows(stage, "images")} == {description}
