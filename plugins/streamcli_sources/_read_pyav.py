"""The video source's PyAV backend (``backend="pyav"``): probe a file, and read a stream from any step.

``_decode_pyav`` decodes and seeks (by timestamp, checked against the scan); this keeps the source's steps on top
of it: every frame is decoded, so times extrapolate as in a full read, and only every ``stride``-th is converted.
Imported only when the backend is chosen: PyAV is an optional extra.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator

import numpy as np
import numpy.typing as npt

from streamcli_sources._decode import Clock
from streamcli_sources._decode_pyav import open_video
from streamcli_sources._scan_record import Scan
from streamcli_sources._video_problems import NO_CONVERT, NO_FRAME, NO_OPEN, cut_warning, read_problem


def probe(path: str, max_failed: int) -> str:
    """Why the source cannot use ``path`` (judged by its first frame), or "" where it can."""
    video = open_video(path, threads=1, max_failed=max_failed)
    if video is None:
        return read_problem(path) or NO_OPEN.format("PyAV")
    with video:
        first = next(video.frames(), None)
        if first is None:
            return NO_FRAME
        return "" if video.bgr(first) is not None else NO_CONVERT


def read(
    path: str, step: int, end: float, *, stride: int, threads: int, max_failed: int, scan: Callable[[], Scan | None]
) -> Generator[tuple[npt.NDArray[np.uint8], float], None, None]:
    """BGR frames and their ``time_ms`` for steps ``step`` (< ``end``) to ``end``: the same frames and times as a
    decode from frame 0 (``_read_opencv.read`` for the rest)."""
    video = open_video(path, threads, max_failed)
    if video is None:
        return
    target = step * stride
    with video:
        clock = Clock(video.fps)
        for index, frame in video.seek(target, scan()):
            ms = clock(video.ms(frame))  # every frame decoded, so times extrapolate as in a full read
            if index < target or (index - target) % stride:
                continue
            bgr = video.bgr(frame)
            if bgr is None:
                warnings.warn(cut_warning(path, index), stacklevel=3)
                return
            yield bgr, ms
            step += 1
            if step >= end:
                return
