"""Keyframes of a video at a fixed rate, decoded with PyAV (FFmpeg)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av


class VideoDecodeError(ValueError):
    """A video that cannot be opened or decoded, or that has no video frames."""


@dataclass(frozen=True)
class Keyframe:
    """One sampled frame: its position in the video and its size."""

    index: int  # keyframe number: the k-th sample at k / rate seconds
    frame_number: int  # decoded frame number within the video
    seconds: float  # presentation time
    width: int
    height: int


def sample_keyframes(path: Path, rate_hz: float, limit: int | None = None) -> list[Keyframe]:
    """The first frame at or after each ``k / rate_hz`` seconds (k = 0, 1, ...), at most ``limit`` of them.

    Every frame up to the last keyframe is decoded (not only demuxed), so a corrupt stream
    fails here rather than later. Raises VideoDecodeError naming the file.
    """
    if rate_hz <= 0:
        raise ValueError(f"rate_hz must be positive, got {rate_hz}")
    keyframes: list[Keyframe] = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoDecodeError(f"{path.name}: no video stream")
            stream = container.streams.video[0]
            first_time: float | None = None
            for number, frame in enumerate(container.decode(stream)):
                seconds = _frame_seconds(frame, stream, number)
                if first_time is None:
                    first_time = seconds
                if seconds - first_time + 1e-9 >= len(keyframes) / rate_hz:
                    keyframes.append(Keyframe(len(keyframes), number, seconds, frame.width, frame.height))
                    if limit is not None and len(keyframes) >= limit:
                        break
    except VideoDecodeError:
        raise
    except (av.FFmpegError, OSError, ValueError, EOFError) as error:
        raise VideoDecodeError(f"{path.name}: {error}") from None
    if not keyframes:
        raise VideoDecodeError(f"{path.name}: no decodable video frames")
    return keyframes


def frame_at(path: Path, seconds: float):
    """The RGB PIL image of the first frame at or after ``seconds`` (a Keyframe's ``seconds``, to 1 µs).

    Raises VideoDecodeError naming the file when it cannot be decoded or ends before ``seconds``.
    """
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoDecodeError(f"{path.name}: no video stream")
            stream = container.streams.video[0]
            for number, frame in enumerate(container.decode(stream)):
                if _frame_seconds(frame, stream, number) + 1e-6 >= seconds:
                    return frame.to_image().convert("RGB")
    except VideoDecodeError:
        raise
    except (av.FFmpegError, OSError, ValueError, EOFError) as error:  # FFmpeg's message names the absolute path
        raise VideoDecodeError(f"{path.name}: {getattr(error, 'strerror', None) or type(error).__name__}") from None
    raise VideoDecodeError(f"{path.name}: no frame at or after {seconds:.6f} s")


def _frame_seconds(frame: av.VideoFrame, stream: av.video.stream.VideoStream, number: int) -> float:
    """Presentation time of a frame; from its number and the stream rate when it has no timestamp."""
    if frame.time is not None:
        return float(frame.time)
    rate = stream.average_rate or stream.base_rate
    if not rate:
        raise VideoDecodeError("frame without timestamp in a stream without a frame rate")
    return number / float(rate)
