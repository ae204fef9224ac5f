"""3D boxes to 2D image boxes: world -> ego -> camera -> pixels, as nuScenes defines the frames.

Poses are ``(translation, rotation)`` with rotation a quaternion ``[w, x, y, z]``. An ego pose
maps ego to world and a calibrated sensor maps sensor to ego, so a world point reaches the
camera through the inverse of each. A box's 2D box is the bounding box of the part of the
convex hull of its projected corners (those in front of the camera, z > 0) that lies inside
the image, the rule nuscenes-devkit's 2D export uses (``post_process_coords``).
"""

from __future__ import annotations

import numpy as np
import shapely

# Box corner signs in the box frame (x forward along length, y left along width, z up),
# in nuscenes-devkit's Box.corners order.
_CORNER_SIGNS = np.array([
    [1, 1, 1, 1, -1, -1, -1, -1],
    [1, -1, -1, 1, 1, -1, -1, 1],
    [1, 1, -1, -1, 1, 1, -1, -1],
], dtype=np.float64).T  # (8, 3)


def quaternion_matrix(quaternion: np.ndarray) -> np.ndarray:
    """Rotation matrices of quaternions ``[..., 4]`` given as w, x, y, z (normalized first)."""
    q = np.asarray(quaternion, dtype=np.float64)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(~np.isfinite(norm)) or np.any(norm < 1e-12):
        raise ValueError("a quaternion has zero or non-finite norm")
    w, x, y, z = np.moveaxis(q / norm, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
    ], axis=-2)


def box_corners(centers: np.ndarray, sizes_wlh: np.ndarray, rotations: np.ndarray) -> np.ndarray:
    """Corners ``(N, 8, 3)`` of boxes with centers ``(N, 3)``, sizes ``(N, 3)`` as width, length, height."""
    half = np.asarray(sizes_wlh, dtype=np.float64)[:, [1, 0, 2]] / 2.0  # (l, w, h) along x, y, z
    local = _CORNER_SIGNS[None, :, :] * half[:, None, :]
    matrices = quaternion_matrix(rotations)  # (N, 3, 3)
    return np.einsum("nij,nkj->nki", matrices, local) + np.asarray(centers, dtype=np.float64)[:, None, :]


def world_to_camera(points: np.ndarray, ego_pose: tuple[np.ndarray, np.ndarray],
                    sensor_pose: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Points ``(..., 3)`` in the world frame, expressed in the camera frame."""
    ego_t, ego_q = ego_pose
    cam_t, cam_q = sensor_pose
    in_ego = (points - np.asarray(ego_t, dtype=np.float64)) @ quaternion_matrix(ego_q)  # R^T p as row vectors
    return (in_ego - np.asarray(cam_t, dtype=np.float64)) @ quaternion_matrix(cam_q)


def project(points: np.ndarray, intrinsic: np.ndarray) -> np.ndarray:
    """Pixel coordinates ``(..., 2)`` of camera-frame points ``(..., 3)`` (z > 0) under a 3x3 intrinsic."""
    uvw = points @ np.asarray(intrinsic, dtype=np.float64).T
    return uvw[..., :2] / uvw[..., 2:3]


def image_boxes(corners_cam: np.ndarray, intrinsic: np.ndarray, width: float, height: float) -> np.ndarray:
    """XYXY boxes ``(N, 4)`` of boxes given by camera-frame corners ``(N, 8, 3)``; NaN rows are not visible.

    A box is visible when at least one corner is in front of the camera and the hull of its
    projected front corners overlaps the image with positive area.
    """
    n = corners_cam.shape[0]
    out = np.full((n, 4), np.nan)
    in_front = corners_cam[..., 2] > 0
    for i in np.flatnonzero(in_front.any(axis=1)):
        pixels = project(corners_cam[i][in_front[i]], intrinsic)
        lo, hi = pixels.min(axis=0), pixels.max(axis=0)
        if lo[0] >= 0 and lo[1] >= 0 and hi[0] <= width and hi[1] <= height:
            out[i] = (lo[0], lo[1], hi[0], hi[1])  # wholly inside: the hull's bounds are the points' bounds
            continue
        clipped = shapely.intersection(shapely.MultiPoint(pixels).convex_hull, shapely.box(0, 0, width, height))
        if clipped.is_empty or clipped.area <= 0:
            continue
        out[i] = shapely.bounds(clipped)
    return out
