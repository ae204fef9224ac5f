"""nuScenes source: camera keyframes of v1.0 tables, with their 3D boxes projected to 2D regions.

Inputs: ``<path>/<version>/<table>.json`` (``version`` auto-detected when one folder holds
``sample.json``). Images are not opened: their size comes from ``sample_data``.

Per camera keyframe an image ``nuscenes:<sample_data token>`` (``group_id`` = scene name,
``context`` = scene description). Per annotation of its sample and per camera that sees it a
region ``<image_id>/g<annotation token>`` and an object ``<image_id>/o<annotation token>``
labelled with the category name: the 2D box of the projected 3D box (see box_projection),
attribute names, visibility token, the box center in the camera frame, and in ``extra`` the
instance token, size and lidar/radar point counts.

Units: one scene each (sorted by scene name), plus a unit ``""`` for rows whose scene or
sample is missing. Accounting unit (``rows_in``): each camera keyframe and each annotation;
``rows_out`` counts kept images and annotations seen by at least one camera (an annotation
fans out into one region and one object per camera). Annotations no camera sees are rejected
as ``nuscenes_outside_cameras``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Literal, TypeGuard

import numpy as np
from pydantic import Field

from reasonvqa import schemas
from reasonvqa.sources import Source, SourceConfig
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.sources.box_projection import box_corners, image_boxes, world_to_camera
from reasonvqa.tasks.sources.nuscenes_tables import Tables, find_table_dir, load_tables
from reasonvqa.tasks.sources.region_columns import RegionColumns

STAGE = "sources_nuscenes"
ORIGIN = "annotation:nuscenes"
LICENSE = "CC BY-NC-SA 4.0"
ORPHANS = ""  # the unit of rows whose scene or sample does not exist


class NuScenesConfig(SourceConfig):
    """nuScenes options: the table version folder and which cameras to read."""

    kind: Literal["nuscenes"] = "nuscenes"
    version: str | None = Field(default=None, description="Table folder under path, e.g. v1.0-mini; "
                                "auto-detected when exactly one folder holds sample.json.")
    cameras: list[str] | None = Field(default=None, description="Camera channels to read (e.g. CAM_FRONT); all when unset.")


class NuScenesSource(Source):
    """nuScenes v1.0 (and tables in its format, e.g. Lyft Level 5)."""

    kind: ClassVar[str] = "nuscenes"
    config_model: ClassVar[type[SourceConfig]] = NuScenesConfig
    visual_domain: ClassVar[str] = "driving"
    exhaustive_taxonomy: ClassVar[bool] = True  # every instance of its categories is annotated (3D boxes)
    license: ClassVar[str] = LICENSE
    description: ClassVar[str] = "nuScenes v1.0 tables: camera keyframes with projected 3D boxes, categories, attributes"
    # camera files sit under the dataroot (config.path, or image_dir) at the sample_data filename
    redistributable: ClassVar[bool] = True
    redistribution: ClassVar[str] = ("nuScenes is CC BY-NC-SA 4.0: shared with attribution, non-commercially, under "
                                     "the same license (each embedded row keeps its license)")

    def check(self, config: SourceConfig) -> None:
        config = self.typed(config)
        if not config.path.is_dir():
            raise FileNotFoundError(f"nuScenes folder not found: {config.path}")
        load_tables(find_table_dir(config.path, config.version))

    def plan(self, config: SourceConfig, shard_size: int) -> list[str]:
        """Scene tokens sorted by scene name, then ``""`` when some rows have no scene or sample."""
        config = self.typed(config)
        tables = load_tables(find_table_dir(config.path, config.version))
        scenes = sorted(tables.rows["scene"].values(), key=lambda s: (str(s.get("name", "")), s["token"]))
        units = [s["token"] for s in scenes]
        return units + [ORPHANS] if _orphan_samples(tables) or _orphan_rows(tables) else units

    def read(self, config: SourceConfig, unit: str, shard_size: int) -> Iterator[StageResult]:
        config = self.typed(config)
        tables = load_tables(find_table_dir(config.path, config.version))
        reader = _SceneReader(tables, config, shard_size)
        if unit == ORPHANS:
            yield reader.orphans()
        else:
            yield from reader.scene(unit)


def _orphan_samples(tables: Tables) -> list[str]:
    """Samples whose scene token is not in the scene table."""
    scenes = tables.rows["scene"]
    return sorted(t for t, row in tables.rows["sample"].items() if row.get("scene_token") not in scenes)


def _orphan_rows(tables: Tables) -> list[tuple[str, str]]:
    """(table, token) of keyframes and annotations whose sample token is not in the sample table."""
    samples = tables.rows["sample"]
    out = [("sample_data", t) for s, tokens in tables.keyframes_by_sample.items() if s not in samples for t in tokens]
    out += [("sample_annotation", t) for s, tokens in tables.annotations_by_sample.items() if s not in samples
            for t in tokens]
    return sorted(out)


@dataclass
class _Camera:
    image_id: str
    channel: str
    width: int
    height: int
    intrinsic: np.ndarray
    ego_pose: tuple[np.ndarray, np.ndarray]
    sensor_pose: tuple[np.ndarray, np.ndarray]


@dataclass
class _Annotation:
    token: str
    label: str
    attributes: list[str]
    visibility: str | None
    row: dict


@dataclass
class _Shard:
    index: int
    rejects: Rejects
    images: list[dict] = field(default_factory=list)
    regions: RegionColumns = field(default_factory=RegionColumns)
    objects: list[dict] = field(default_factory=list)
    rows_in: int = 0
    rows_out: int = 0
    non_camera_keyframes: int = 0


class _SceneReader:
    def __init__(self, tables: Tables, config: NuScenesConfig, shard_size: int) -> None:
        self.tables, self.config, self.shard_size = tables, config, shard_size

    def scene(self, token: str) -> Iterator[StageResult]:
        scene = self.tables.get("scene", token)
        if scene is None:
            raise KeyError(f"scene {token!r} is not in {self.tables.folder / 'scene.json'}")
        shard = _Shard(0, Rejects(STAGE, 0))
        images_read = 0
        for sample_token in self.tables.samples_by_scene.get(token, []):
            if self.config.max_images is not None and images_read >= self.config.max_images:
                break
            before = len(shard.images)
            self._sample(scene, sample_token, shard)
            images_read += len(shard.images) - before
            if len(shard.images) >= self.shard_size:
                yield self._result(shard, scene)
                shard = _Shard(shard.index + 1, Rejects(STAGE, shard.index + 1))
        if shard.rows_in or shard.index == 0:
            yield self._result(shard, scene)

    def orphans(self) -> StageResult:
        """Rejects for keyframes and annotations whose scene or sample does not exist."""
        shard = _Shard(0, Rejects(STAGE, 0))
        for sample_token in _orphan_samples(self.tables):
            scene_token = self.tables.rows["sample"][sample_token].get("scene_token")
            for sd_token in self.tables.keyframes_by_sample.get(sample_token, []):
                if self._is_other_sensor(self.tables.rows["sample_data"][sd_token]):
                    continue
                shard.rows_in += 1
                shard.rejects.add("nuscenes_missing_token:scene", f"sample_data.json#{sd_token}",
                                  f"sample {sample_token} names scene {scene_token!r}")
            for ann_token in self.tables.annotations_by_sample.get(sample_token, []):
                shard.rows_in += 1
                shard.rejects.add("nuscenes_missing_token:scene", f"sample_annotation.json#{ann_token}",
                                  f"sample {sample_token} names scene {scene_token!r}")
        for table, token in _orphan_rows(self.tables):
            row = self.tables.rows[table][token]
            if table == "sample_data" and self._is_other_sensor(row):
                continue
            shard.rows_in += 1
            shard.rejects.add("nuscenes_missing_token:sample", f"{table}.json#{token}",
                              f"sample {row.get('sample_token')!r}")
        return self._result(shard, None)

    def _is_other_sensor(self, sample_data: dict) -> bool:
        """True for a keyframe known to be a non-camera (or unselected camera) sensor."""
        calib = self.tables.get("calibrated_sensor", sample_data.get("calibrated_sensor_token"))
        sensor = self.tables.get("sensor", calib.get("sensor_token")) if calib else None
        if sensor is None:
            return False
        return sensor.get("modality") != "camera" or (
            self.config.cameras is not None and sensor.get("channel") not in self.config.cameras)

    def _sample(self, scene: dict, sample_token: str, shard: _Shard) -> None:
        cameras = [c for c in (self._camera(scene, t, shard) for t in self.tables.keyframes_by_sample.get(sample_token, []))
                   if c is not None]
        annotations = [a for a in (self._annotation(t, shard) for t in self.tables.annotations_by_sample.get(sample_token, []))
                       if a is not None]
        if not annotations:
            return
        corners = box_corners(np.array([a.row["translation"] for a in annotations], dtype=np.float64),
                              np.array([a.row["size"] for a in annotations], dtype=np.float64),
                              np.array([a.row["rotation"] for a in annotations], dtype=np.float64))
        centers = np.array([a.row["translation"] for a in annotations], dtype=np.float64)
        seen = np.zeros(len(annotations), dtype=bool)
        for camera in cameras:
            in_camera = world_to_camera(corners, camera.ego_pose, camera.sensor_pose)
            boxes = image_boxes(in_camera, camera.intrinsic, camera.width, camera.height)
            centers_cam = world_to_camera(centers, camera.ego_pose, camera.sensor_pose)
            for i in np.flatnonzero(~np.isnan(boxes[:, 0])):
                seen[i] = True
                self._add_region(shard, camera, annotations[i], boxes[i], centers_cam[i], in_camera[i])
        for annotation, was_seen in zip(annotations, seen):
            if was_seen:
                shard.rows_out += 1
            else:
                shard.rejects.add("nuscenes_outside_cameras", f"sample_annotation.json#{annotation.token}",
                                  f"no camera keyframe of sample {sample_token} sees it")

    def _camera(self, scene: dict, token: str, shard: _Shard) -> _Camera | None:
        sd = self.tables.rows["sample_data"][token]
        where = f"sample_data.json#{token}"
        calib = self.tables.get("calibrated_sensor", sd.get("calibrated_sensor_token"))
        sensor = self.tables.get("sensor", calib.get("sensor_token")) if calib else None
        if sensor is not None and self._is_other_sensor(sd):
            shard.non_camera_keyframes += 1
            return None
        shard.rows_in += 1
        if calib is None or sensor is None:
            missing = "calibrated_sensor" if calib is None else "sensor"
            shard.rejects.add(f"nuscenes_missing_token:{missing}", where, sd)
            return None
        ego = self.tables.get("ego_pose", sd.get("ego_pose_token"))
        if ego is None:
            shard.rejects.add("nuscenes_missing_token:ego_pose", where, sd)
            return None
        try:
            intrinsic = np.array(calib.get("camera_intrinsic"), dtype=np.float64)
            ego_pose = _pose(ego)
            sensor_pose = _pose(calib)
        except (ValueError, TypeError) as error:
            shard.rejects.add("nuscenes_pose_invalid", where, str(error))
            return None
        if intrinsic.shape != (3, 3) or not np.isfinite(intrinsic).all():
            shard.rejects.add("nuscenes_intrinsic_invalid", where, f"camera_intrinsic {calib.get('camera_intrinsic')!r}")
            return None
        width, height = sd.get("width"), sd.get("height")
        if not (_positive_int(width) and _positive_int(height)):
            shard.rejects.add("nuscenes_image_size_invalid", where, f"width {width!r}, height {height!r}")
            return None
        width, height = int(width), int(height)
        image_id = f"nuscenes:{token}"
        shard.images.append({
            "image_id": image_id, "source": "nuscenes", "source_image_id": token, "width": width, "height": height,
            "file_path": sd.get("filename"), "group_id": scene.get("name"), "visual_domain": "driving",
            "license": LICENSE, "context": scene.get("description") or None,
        })
        shard.rows_out += 1
        return _Camera(image_id, sensor.get("channel", ""), width, height, intrinsic, ego_pose, sensor_pose)

    def _annotation(self, token: str, shard: _Shard) -> _Annotation | None:
        row = self.tables.rows["sample_annotation"][token]
        where = f"sample_annotation.json#{token}"
        shard.rows_in += 1
        instance = self.tables.get("instance", row.get("instance_token"))
        category = self.tables.get("category", instance.get("category_token")) if instance else None
        if instance is None or category is None:
            shard.rejects.add(f"nuscenes_missing_token:{'instance' if instance is None else 'category'}", where, row)
            return None
        attributes = []
        for attribute_token in row.get("attribute_tokens") or []:
            attribute = self.tables.get("attribute", attribute_token)
            if attribute is None:
                shard.rejects.add("nuscenes_missing_token:attribute", where, row)
                return None
            attributes.append(attribute["name"])
        visibility = row.get("visibility_token") or None
        if visibility is not None and self.tables.get("visibility", visibility) is None:
            shard.rejects.add("nuscenes_missing_token:visibility", where, row)
            return None
        problem = _geometry_problem(row)
        if problem is not None:
            shard.rejects.add("nuscenes_box_invalid", where, problem)
            return None
        return _Annotation(token, category["name"], attributes, visibility, row)

    def _add_region(self, shard: _Shard, camera: _Camera, annotation: _Annotation, box: np.ndarray,
                    center: np.ndarray, corners: np.ndarray) -> None:
        x0, y0, x1, y1 = (float(v) for v in box)
        row = annotation.row
        extra = {"instance_token": row["instance_token"], "size_wlh": row["size"], "channel": camera.channel,
                 "corners_in_front": int((corners[:, 2] > 0).sum()),
                 "num_lidar_pts": row.get("num_lidar_pts"), "num_radar_pts": row.get("num_radar_pts")}
        shard.regions.add(
            region_id=f"{camera.image_id}/g{annotation.token}", image_id=camera.image_id, label=annotation.label,
            box=(x0, y0, x1 - x0, y1 - y0), area=(x1 - x0) * (y1 - y0), origin=ORIGIN,
            attributes=annotation.attributes, visibility=annotation.visibility,
            center_3d=[float(v) for v in center], extra=extra,
        )
        shard.objects.append({
            "object_id": f"{camera.image_id}/o{annotation.token}", "image_id": camera.image_id,
            "label": annotation.label, "names": [annotation.label], "x": x0, "y": y0, "w": x1 - x0, "h": y1 - y0,
            "origin": ORIGIN,
        })

    def _result(self, shard: _Shard, scene: dict | None) -> StageResult:
        return StageResult(
            outputs={"images": schemas.from_rows(shard.images, schemas.IMAGES), "regions": shard.regions.table(),
                     "objects": schemas.from_rows(shard.objects, schemas.OBJECTS)},
            rejects=shard.rejects, rows_in=shard.rows_in, rows_out=shard.rows_out,
            extra={"source": "nuscenes", "scene": scene.get("name") if scene else None,
                   "non_camera_keyframes": shard.non_camera_keyframes},
        )


def _pose(row: dict) -> tuple[np.ndarray, np.ndarray]:
    """(translation, rotation quaternion w, x, y, z) of an ego_pose or calibrated_sensor row."""
    translation = np.array(row["translation"], dtype=np.float64)
    rotation = np.array(row["rotation"], dtype=np.float64)
    if translation.shape != (3,) or rotation.shape != (4,) or not (np.isfinite(translation).all()
                                                                  and np.isfinite(rotation).all()):
        raise ValueError(f"translation {row['translation']!r} / rotation {row['rotation']!r}")
    if np.linalg.norm(rotation) < 1e-12:
        raise ValueError("zero rotation quaternion")
    return translation, rotation


def _geometry_problem(row: dict) -> str | None:
    """Why a sample_annotation's box cannot be projected, or None."""
    try:
        translation = np.array(row["translation"], dtype=np.float64)
        size = np.array(row["size"], dtype=np.float64)
        rotation = np.array(row["rotation"], dtype=np.float64)
    except (KeyError, ValueError, TypeError) as error:
        return f"box fields unreadable: {error}"
    if translation.shape != (3,) or size.shape != (3,) or rotation.shape != (4,):
        return "translation, size and rotation must have 3, 3 and 4 numbers"
    if not (np.isfinite(translation).all() and np.isfinite(size).all() and np.isfinite(rotation).all()):
        return "non-finite box value"
    if (size <= 0).any():
        return f"size {row['size']!r} is not positive"
    if np.linalg.norm(rotation) < 1e-12:
        return "zero rotation quaternion"
    return None


def _positive_int(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 or (
        isinstance(value, float) and math.isfinite(value) and value > 0 and value.is_integer())
