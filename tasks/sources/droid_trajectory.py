"""What the DROID source takes from an episode's ``trajectory.h5`` (read with h5py).

The raw release writes one HDF5 dataset per leaf of the recorded timestep dict, the first
axis being the timestep (DROID's ``TrajectoryWriter``), and the episode metadata as file
attributes. The parts read here, as DROID's own post-processing reads them:

* ``action/joint_position``: its row count is the trajectory length (number of timesteps;
  the MP4 recordings hold one frame per timestep);
* file attribute ``current_task``: the instruction the operator typed;
* ``observation/camera_type/<serial>``: per camera serial, ``0`` for the wrist (hand) camera,
  otherwise an external one; the external cameras sorted by serial are ``ext1`` and ``ext2``.

A file without an ``action`` group is incomplete (recording aborted); DROID's post-processing
treats it as invalid, and so does this reader.

Not verified against a real episode: no DROID file with a usable licence is available here; the
tests build HDF5 files in the layout above with h5py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

FILE_NAME = "trajectory.h5"


class TrajectoryError(ValueError):
    """A trajectory.h5 that cannot be read or lacks what every DROID trajectory has."""


@dataclass(frozen=True)
class Trajectory:
    """One episode's trajectory: its length in timesteps, the operator's task and the camera roles."""

    length: int
    current_task: str | None
    cameras: dict[str, str]  # role (wrist, ext1, ext2) -> camera serial


def read_trajectory(path: Path) -> Trajectory:
    """Read ``path``; TrajectoryError with a one-line reason when it is not a usable DROID trajectory."""
    try:
        with h5py.File(path, "r") as h5:
            return _trajectory(h5)
    except TrajectoryError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as error:  # h5py raises OSError for a damaged file
        raise TrajectoryError(f"{path.name}: {error}") from None


def _trajectory(h5: h5py.File) -> Trajectory:
    if "action" not in h5:
        raise TrajectoryError("no 'action' group (incomplete recording)")
    joints = h5["action"].get("joint_position")
    if not isinstance(joints, h5py.Dataset) or joints.ndim < 1:
        raise TrajectoryError("no 'action/joint_position' dataset")
    length = int(joints.shape[0])
    task = h5.attrs.get("current_task")
    if isinstance(task, bytes):
        task = task.decode("utf-8", errors="replace")
    task = task.strip() if isinstance(task, str) else ""
    return Trajectory(length, task or None, _camera_roles(h5))


def _camera_roles(h5: h5py.File) -> dict[str, str]:
    """Role -> serial from ``observation/camera_type`` (0 = wrist; external ones by sorted serial)."""
    types = h5.get("observation/camera_type")
    if not isinstance(types, h5py.Group):
        return {}
    roles: dict[str, str] = {}
    external = iter(("ext1", "ext2"))
    for serial in sorted(types):
        values = types[serial]
        if not isinstance(values, h5py.Dataset) or values.size == 0:
            continue
        if int(np.asarray(values[()]).reshape(-1)[0]) == 0:
            roles.setdefault("wrist", serial)
        else:
            role = next(external, None)
            if role is not None:
                roles[role] = serial
    return roles
