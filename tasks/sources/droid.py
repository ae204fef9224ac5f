"""DROID source: the raw release, one folder per episode, keyframes sampled from its MP4 recordings.

An episode folder holds ``metadata_<uuid>.json`` (``uuid``, ``current_task``, ``ext1_cam_serial``,
``ext2_cam_serial``, ``wrist_cam_serial``, ``*_mp4_path``, ...), ``trajectory.h5`` and
``recordings/MP4/<camera serial>.mp4`` (``-stereo.mp4`` side-by-side copies are not read). The
language instructions of the crowd-sourced annotation file (``{episode uuid:
{"language_instruction1": ..., ...}}``), when configured, join ``current_task`` as the image context.

``trajectory.h5``, when present (see ``droid_trajectory.py``), gives the trajectory length (the
recordings hold one frame per timestep: a keyframe past the last timestep has no robot state and
is rejected), the camera roles where the metadata lacks a camera's serial, and the operator's task
where the metadata lacks ``current_task``. An unreadable or incomplete one refuses the episode.

Per configured camera, keyframes at ``keyframe_rate_hz`` become images
``droid:<uuid>/<camera>/<k>`` (``file_path`` = the MP4 with a ``#t=<seconds>`` fragment,
``group_id`` = the episode uuid). DROID has no boxes or masks, so no regions.

Units: episode folders (every folder holding a metadata file, ``trajectory.h5`` or ``recordings/``),
sorted. Accounting unit (``rows_in``): each keyframe read, each camera video that could not be
read, and each episode refused as a whole (no or bad metadata, bad trajectory).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import ClassVar, Iterator, Literal

from pydantic import Field

from reasonvqa import schemas
from reasonvqa.sources import ImageUnavailable, Source, SourceConfig, file_under
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.sources.droid_trajectory import FILE_NAME as TRAJECTORY_FILE
from reasonvqa.tasks.sources.droid_trajectory import Trajectory, TrajectoryError, read_trajectory
from reasonvqa.tasks.sources.video_keyframes import VideoDecodeError, frame_at, sample_keyframes

STAGE = "sources_droid"
LICENSE = "CC BY 4.0"
CAMERAS: tuple[Literal["ext1", "ext2", "wrist"], ...] = ("ext1", "ext2", "wrist")
INSTRUCTION_KEYS = ("language_instruction1", "language_instruction2", "language_instruction3")


class DroidConfig(SourceConfig):
    """DROID options: keyframe rate, cameras, and the language annotation file."""

    kind: Literal["droid"] = "droid"
    keyframe_rate_hz: float = Field(default=1.0, gt=0, description="Keyframes per second of video.")
    cameras: list[Literal["ext1", "ext2", "wrist"]] = Field(default=list(CAMERAS), min_length=1)
    max_keyframes_per_video: int | None = Field(default=None, ge=1)
    annotations_file: str | None = Field(default=None, description="Language annotations JSON inside path "
                                         "(episode uuid -> language_instruction1..3).")


class DroidSource(Source):
    """DROID raw episodes (metadata JSON, trajectory.h5, MP4 per camera)."""

    kind: ClassVar[str] = "droid"
    config_model: ClassVar[type[SourceConfig]] = DroidConfig
    visual_domain: ClassVar[str] = "robotics"
    license: ClassVar[str] = LICENSE
    description: ClassVar[str] = "DROID raw episodes: keyframes of the MP4 recordings, language instructions as context"
    redistributable: ClassVar[bool] = True
    redistribution: ClassVar[str] = "DROID is released under CC BY 4.0 (attribution)"

    def image_bytes(self, config: SourceConfig, file_path: str) -> bytes:
        """The keyframe ``<video>.mp4#t=<seconds>`` decoded (PyAV) and encoded as PNG with fixed settings."""
        video, _, at = (file_path or "").partition("#t=")
        try:
            seconds = float(at)
        except ValueError:
            raise ImageUnavailable("no_file_path", f"not a keyframe path (<video>#t=<seconds>): {file_path!r}") from None
        try:
            frame = frame_at(file_under(config.image_dir or config.path, video), seconds)
        except VideoDecodeError as error:
            raise ImageUnavailable("corrupt", str(error)) from None
        buffer = io.BytesIO()
        frame.save(buffer, format="PNG", optimize=False, compress_level=6)
        return buffer.getvalue()

    def check(self, config: SourceConfig) -> None:
        config = self.typed(config)
        if not config.path.is_dir():
            raise FileNotFoundError(f"DROID folder not found: {config.path}")
        if config.annotations_file is not None:
            read_instructions(config.path / config.annotations_file)
        if not self.plan(config, 1):
            raise FileNotFoundError(f"no DROID episode folders (metadata_*.json) under {config.path}")

    def plan(self, config: SourceConfig, shard_size: int) -> list[str]:
        """Episode folders relative to ``path``, sorted."""
        root = Path(config.path)
        folders = {p.parent for p in root.rglob("metadata_*.json")}
        folders |= {p.parent for p in root.rglob("trajectory.h5")}
        folders |= {p.parent for p in root.rglob("recordings") if p.is_dir()}
        return sorted(str(f.relative_to(root)) for f in folders)

    def read(self, config: SourceConfig, unit: str, shard_size: int) -> Iterator[StageResult]:
        config = self.typed(config)
        instructions = read_instructions(config.path / config.annotations_file) if config.annotations_file else {}
        yield from _Episode(config, unit, instructions, shard_size).shards()


def read_instructions(path: Path) -> dict[str, list[str]]:
    """Episode uuid -> its non-empty language instructions, from the annotation JSON."""
    if not path.is_file():
        raise FileNotFoundError(f"DROID annotations file not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path.name}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: expected an object keyed by episode uuid")
    out = {}
    for uuid, entry in data.items():
        if isinstance(entry, dict):
            out[uuid] = [entry[k].strip() for k in INSTRUCTION_KEYS if isinstance(entry.get(k), str) and entry[k].strip()]
    return out


class _Episode:
    def __init__(self, config: DroidConfig, unit: str, instructions: dict[str, list[str]], shard_size: int) -> None:
        self.config, self.unit, self.instructions, self.shard_size = config, unit, instructions, shard_size
        self.folder = config.path / unit

    def shards(self) -> Iterator[StageResult]:
        rejects = Rejects(STAGE, 0)
        metadata, where = self._metadata(rejects)
        if metadata is None:
            yield self._result([], rejects, 1)
            return
        trajectory = self._trajectory(rejects)
        if trajectory is False:
            yield self._result([], rejects, 1)
            return
        uuid = metadata["uuid"]
        context = _context(metadata, trajectory, self.instructions.get(uuid, []))
        images: list[dict] = []
        rows_in = 0
        shard = 0
        for camera in self.config.cameras:
            video, problem = self._video(metadata, trajectory, camera)
            if video is None:
                rows_in += 1
                rejects.add(problem[0], f"{self.unit}/{where}#{camera}", problem[1])
                continue
            try:
                keyframes = sample_keyframes(video, self.config.keyframe_rate_hz, self.config.max_keyframes_per_video)
            except VideoDecodeError as error:
                rows_in += 1
                rejects.add("droid_video_undecodable", f"{self.unit}/{video.relative_to(self.folder)}", str(error))
                continue
            relative = video.relative_to(self.config.path).as_posix()
            for keyframe in keyframes:
                rows_in += 1
                if trajectory is not None and keyframe.frame_number >= trajectory.length:
                    rejects.add("droid_keyframe_past_trajectory", f"{self.unit}/{video.relative_to(self.folder)}"
                                f"#frame={keyframe.frame_number}", f"trajectory has {trajectory.length} timesteps")
                    continue
                images.append({
                    "image_id": f"droid:{uuid}/{camera}/{keyframe.index}", "source": "droid",
                    "source_image_id": f"{uuid}/{camera}/{keyframe.index}", "width": keyframe.width,
                    "height": keyframe.height, "file_path": f"{relative}#t={keyframe.seconds:.6f}",
                    "group_id": uuid, "visual_domain": "robotics", "license": LICENSE, "context": context,
                })
                if len(images) >= self.shard_size:
                    yield self._result(images, rejects, rows_in)
                    shard += 1
                    images, rejects, rows_in = [], Rejects(STAGE, shard), 0
        if images or rows_in or shard == 0:
            yield self._result(images, rejects, rows_in)

    def _metadata(self, rejects: Rejects) -> tuple[dict | None, str]:
        files = sorted(self.folder.glob("metadata_*.json"))
        if not files:
            rejects.add("droid_metadata_missing", f"{self.unit}/", "no metadata_*.json in the episode folder")
            return None, ""
        if len(files) > 1:
            rejects.add("droid_metadata_ambiguous", f"{self.unit}/", ", ".join(f.name for f in files))
            return None, ""
        path = files[0]
        try:
            metadata = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            rejects.add("droid_metadata_invalid", f"{self.unit}/{path.name}", str(error))
            return None, path.name
        if not isinstance(metadata, dict) or not isinstance(metadata.get("uuid"), str) or not metadata["uuid"]:
            rejects.add("droid_metadata_invalid", f"{self.unit}/{path.name}", "no 'uuid' string")
            return None, path.name
        return metadata, path.name

    def _trajectory(self, rejects: Rejects) -> Trajectory | None | Literal[False]:
        """The episode's trajectory; None when it has no trajectory.h5; False when it was refused."""
        path = self.folder / TRAJECTORY_FILE
        if not path.is_file():
            return None
        try:
            return read_trajectory(path)
        except TrajectoryError as error:
            rejects.add("droid_trajectory_invalid", f"{self.unit}/{TRAJECTORY_FILE}", str(error))
            return False

    def _video(self, metadata: dict, trajectory: Trajectory | None, camera: str) -> tuple[Path | None, tuple[str, str]]:
        """The camera's MP4 in ``recordings/MP4/``, found by serial (the metadata's, else the
        trajectory's camera roles) or by the metadata's mp4 path."""
        mp4_dir = self.folder / "recordings" / "MP4"
        names = []
        serial = metadata.get(f"{camera}_cam_serial")
        if not (isinstance(serial, (str, int)) and str(serial)) and trajectory is not None:
            serial = trajectory.cameras.get(camera)
        if isinstance(serial, (str, int)) and str(serial):
            names.append(f"{serial}.mp4")
        listed = metadata.get(f"{camera}_mp4_path")
        if isinstance(listed, str) and listed:
            names.append(Path(listed).name)
        if not names:
            return None, ("droid_camera_unknown", f"neither metadata nor trajectory.h5 name the {camera} camera")
        for name in names:
            if (mp4_dir / name).is_file():
                return mp4_dir / name, ("", "")
        return None, ("droid_video_missing", f"none of {names} in recordings/MP4")

    def _result(self, images: list[dict], rejects: Rejects, rows_in: int) -> StageResult:
        return StageResult(outputs={"images": schemas.from_rows(images, schemas.IMAGES)}, rejects=rejects,
                           rows_in=rows_in, extra={"source": "droid", "episode": self.unit})


def _context(metadata: dict, trajectory: Trajectory | None, instructions: list[str]) -> str | None:
    """The episode's instructions, one per line: the operator's task first (the metadata's, else
    the trajectory's), then the annotations, deduplicated."""
    texts = []
    task = metadata.get("current_task")
    if not (isinstance(task, str) and task.strip()) and trajectory is not None:
        task = trajectory.current_task
    for text in ([task.strip()] if isinstance(task, str) else []) + instructions:
        if text and text not in texts:
            texts.append(text)
    return "\n".join(texts) or None
