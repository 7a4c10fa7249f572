"""A LeRobot camera's frames at given times, decoded sequentially along the episode with the video source's backends.

LeRobot's rule (``dataset_reader.py``, ``_query_videos``): the frame of row r is the one at the row's ``timestamp``
(plus the episode's ``from_timestamp`` in its v3.x file), within a tolerance; here ``1 / fps / 2``, so that a
frame is never taken for its neighbour's row. One decoder runs forward from the first wanted time: PyAV seeks to
the keyframe before it (``PyAVVideo.from_ms``), OpenCV decodes the file from its start. A time with no frame in
its window ends the frames with a warning naming the episode: a later frame is never shifted into its place.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from streamcli_sources import _video_backends
from streamcli_sources._convert import INTERPOLATION, convert

Pixels = Callable[[], "npt.NDArray[np.uint8] | None"]
"""A decoded frame as the step's uint8 RGB ``(3, H, W)``, converted only when asked; ``None`` where FFmpeg cannot."""


def _pyav(
    path: str, from_ms: float, threads: int, max_failed: int, size: tuple[int, int], interpolation: str
) -> Iterator[tuple[float, Pixels]]:
    from streamcli_sources._decode_pyav import open_video  # PyAV is an optional extra

    video = open_video(path, threads, max_failed)
    if video is None:
        raise ValueError(f"{path!r}: PyAV cannot open it as a video")

    def chw(frame: Any) -> npt.NDArray[np.uint8] | None:
        rgb = video.rgb(frame)  # RGB straight from FFmpeg's converter: LeRobot's own pixels, one conversion
        if rgb is None:
            return None
        if rgb.shape[:2] != size:
            rgb = np.asarray(cv2.resize(rgb, (size[1], size[0]), interpolation=INTERPOLATION[interpolation]))
        return np.ascontiguousarray(rgb.transpose(2, 0, 1))

    with video:
        for frame in video.from_ms(from_ms):
            yield video.ms(frame), lambda frame=frame: chw(frame)  # type: ignore[misc]


def _opencv(
    path: str, threads: int, max_failed: int, size: tuple[int, int], interpolation: str
) -> Iterator[tuple[float, Pixels]]:
    frames = _video_backends.load("opencv").read(
        path, 0, math.inf, stride=1, threads=threads, max_failed=max_failed, scan=lambda: None
    )
    try:
        for bgr, ms in frames:
            yield ms, lambda bgr=bgr: convert(bgr, size, False, interpolation)  # type: ignore[misc]
    finally:
        frames.close()


def frames_at(
    path: str,
    times_s: npt.NDArray[np.float64],
    *,
    fps: float,
    size: tuple[int, int],
    backend: str,
    threads: int,
    max_failed: int,
    interpolation: str,
    where: str,
    first: int = 0,
) -> Iterator[npt.NDArray[np.uint8]]:
    """uint8 RGB ``(3, *size)`` frames of ``path`` at ``times_s`` (seconds in the file, increasing), in order; it ends
    early, with a ``RuntimeWarning`` naming ``where`` (the episode and camera), at the first time without a frame
    (counted as step ``first`` + its place in ``times_s``)."""
    if not len(times_s):
        return
    tol = 500.0 / fps
    wants = np.asarray(times_s, np.float64) * 1000.0
    if backend == "pyav":
        decoded = _pyav(path, float(wants[0]) - tol, threads, max_failed, size, interpolation)
    else:
        decoded = _opencv(path, threads, max_failed, size, interpolation)
    pending: tuple[float, Pixels] | None = None
    try:
        for row, want in enumerate(wants.tolist()):
            while pending is None or pending[0] < want - tol:  # frames before this row's window: not its frame
                pending = next(decoded, None)
                if pending is None:
                    _missing(where, path, first + row, first + len(wants), want, "the video ends before it")
                    return
                if math.isnan(pending[0]):
                    _missing(where, path, first + row, first + len(wants), want, "a frame has no timestamp")
                    return
            if pending[0] > want + tol:
                why = f"the next frame is at {pending[0] / 1000:.4f} s"
                _missing(where, path, first + row, first + len(wants), want, why)
                return
            pixels = pending[1]()
            if pixels is None:
                _missing(where, path, first + row, first + len(wants), want, "FFmpeg cannot convert its frame")
                return
            yield pixels
    finally:
        decoded.close()  # type: ignore[attr-defined]


def _missing(where: str, path: str, row: int, rows: int, want_ms: float, why: str) -> None:
    warnings.warn(
        f"lerobot: {where}: no frame of {path!r} within 1/fps/2 of {want_ms / 1000:.4f} s (step {row} of "
        f"{rows}), {why}; the stream ends there",
        RuntimeWarning,
        stacklevel=4,
    )
