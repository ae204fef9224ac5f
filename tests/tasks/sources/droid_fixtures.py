"""Build DROID raw-release episode folders for tests: metadata JSON and MP4s encoded with PyAV."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

SERIALS = {"ext1": "24400334", "ext2": "26405488", "wrist": "18026681"}


def write_mp4(path: Path, seconds: float = 3.0, fps: int = 15, size: tuple[int, int] = (64, 48)) -> Path:
    """A real MPEG-4 Part 2 video: ``seconds * fps`` frames of a moving gradient."""
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = size
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=Fraction(fps))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(int(seconds * fps)):
            pixels = np.zeros((height, width, 3), dtype=np.uint8)
            pixels[..., 0] = (np.arange(width) * 4 + i * 8) % 256
            pixels[..., 1] = 128
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def metadata(uuid: str, task: str = "put the marker in the cup") -> dict:
    """Metadata with the fields the raw release documents (values illustrative)."""
    folder = "AUTOLab/success/2023-07-07/Fri_Jul__7_09:42:23_2023"
    return {
        "uuid": uuid, "lab": "AUTOLab", "user": "operator", "user_id": "4c9b", "date": "2023-07-07",
        "timestamp": "2023-07-07-09h-42m-23s", "hdf5_path": f"{folder}/trajectory.h5", "building": "lab",
        "scene_id": 1, "success": True, "robot_serial": "panda-1", "r2d2_version": "1.3", "current_task": task,
        "trajectory_length": 45,
        **{f"{cam}_cam_serial": serial for cam, serial in SERIALS.items()},
        **{f"{cam}_mp4_path": f"{folder}/recordings/MP4/{serial}.mp4" for cam, serial in SERIALS.items()},
    }


def write_episode(folder: Path, uuid: str, cameras: tuple[str, ...] = ("ext1", "ext2", "wrist"), **video) -> Path:
    """An episode folder: ``metadata_<uuid>.json`` and one MP4 per camera in ``recordings/MP4``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"metadata_{uuid}.json").write_text(json.dumps(metadata(uuid)))
    for camera in cameras:
        write_mp4(folder / "recordings" / "MP4" / f"{SERIALS[camera]}.mp4", **video)
    return folder


def write_trajectory(folder: Path, length: int, task: str | None = "put the marker in the cup",
                     serials: dict[str, str] = SERIALS) -> Path:
    """``trajectory.h5`` in the raw release's layout: one dataset per recorded leaf with the timestep
    as first axis (DROID's TrajectoryWriter), the episode metadata as file attributes. Camera type
    0 marks the wrist camera. Values are illustrative; the layout is what the reader relies on."""
    import h5py

    path = folder / "trajectory.h5"
    steps = np.arange(length)
    with h5py.File(path, "w") as h5:
        if task is not None:
            h5.attrs["current_task"] = task
        h5.attrs.update({"success": True, "building": "lab", "scene_id": 1, "robot_serial_number": "panda-1",
                         "version_number": "1.3", "user": "operator"})
        h5["action/joint_position"] = np.zeros((length, 7))
        h5["action/cartesian_position"] = np.zeros((length, 6))
        h5["action/gripper_position"] = np.linspace(0, 1, length)
        h5["observation/robot_state/cartesian_position"] = np.zeros((length, 6))
        h5["observation/robot_state/gripper_position"] = np.linspace(0, 1, length)
        h5["observation/timestamp/control/step_start"] = 1688722943000 + steps * 66
        for role, serial in serials.items():
            h5[f"observation/camera_type/{serial}"] = np.full(length, 0 if role == "wrist" else 1)
            h5[f"observation/camera_extrinsics/{serial}_left"] = np.zeros((length, 6))
            h5[f"observation/timestamp/cameras/{serial}_estimated_capture"] = 1688722943000 + steps * 66
    return path
