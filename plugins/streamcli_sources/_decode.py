"""One decode loop for video files, shared by the video source and its length scan.

Both must agree frame for frame, so what counts as a frame and what its time is are defined here only:
a frame is a successful ``grab()``; a run of ``max_failed`` failed grabs ends the stream (one failure is
not always the end: some Theora files fail their first read, then decode fine).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import cv2

# FFmpeg's interrupt callback honours these for files too, so a stalled read cannot hang a worker.
_TIMEOUT_MS = 20_000


def open_capture(path: str, threads: int) -> Any:
    """A ``cv2.VideoCapture`` on the FFmpeg backend (never another: results must not depend on the host).

    ``threads`` > 0 sets FFmpeg's decoder threads; 0 keeps OpenCV's default (automatic).
    """
    params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, _TIMEOUT_MS, cv2.CAP_PROP_READ_TIMEOUT_MSEC, _TIMEOUT_MS]
    if threads > 0:
        params += [cv2.CAP_PROP_N_THREADS, threads]
    return cv2.VideoCapture(path, cv2.CAP_FFMPEG, params)


class Clock:
    """Turns ``CAP_PROP_POS_MSEC`` into a strictly increasing ``time_ms``.

    A container time is kept when it is later than the previous frame's. Otherwise (MPEG-1 streams that
    report 0 for every frame, or a last frame at 0) the time is extrapolated from the previous frame by
    the last good frame interval, or by ``1000 / fps`` before there is one (fps from the header when it is
    between 1 and 240, else 25). The rule looks only backwards, so a sequential decode from frame 0 is
    always reproducible.
    """

    def __init__(self, header_fps: float) -> None:
        fps = header_fps if 1.0 <= header_fps <= 240.0 else 25.0
        self.delta = 1000.0 / fps
        self.prev: float | None = None

    def __call__(self, pos_ms: float) -> float:
        good = math.isfinite(pos_ms) and pos_ms >= 0.0
        if self.prev is None:
            t = pos_ms if good else 0.0
        elif good and pos_ms > self.prev:
            t = pos_ms
            self.delta = t - self.prev
        else:
            t = self.prev + self.delta
        self.prev = t
        return t


def grab_frames(cap: Any, max_failed: int) -> Iterator[float]:
    """Grab frames until ``max_failed`` consecutive failures; yields each frame's raw ``POS_MSEC``.

    The caller may ``cap.retrieve()`` the frame just grabbed before advancing the iterator.
    """
    failed = 0
    while failed < max_failed:
        if not cap.grab():
            failed += 1
            continue
        failed = 0
        yield float(cap.get(cv2.CAP_PROP_POS_MSEC))
