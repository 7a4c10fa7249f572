"""The video source's OpenCV backend (the default): probe a file, and read a stream from any step.

A read from step k seeks by frame index only where the file's scan can check where the seek landed (the frame's
time and pixels against the scan's): seeking by index is inexact for MPEG program streams and some H.264 files.
Elsewhere, or when the check fails, it decodes from the start and discards, which is exact but slower. Both
paths run ``_decode``'s loop, so a resumed stream gives the frames of a full read.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator, Iterator
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from streamcli_sources._decode import Clock, grab_frames, open_capture, retrieve
from streamcli_sources._repeat_check import UNWRITTEN, unwritten
from streamcli_sources._scan_record import Scan, checksum
from streamcli_sources._video_problems import NO_CONVERT, NO_FRAME, NO_OPEN, cut_warning, read_problem

Frames = Generator[tuple[npt.NDArray[np.uint8], float], None, None]
"""A stream's kept frames, BGR as decoded, each with its ``time_ms``."""
_Position = tuple[Any, Clock, float, Iterator[float], "npt.NDArray[np.uint8] | None"]


def probe(path: str, max_failed: int) -> str:
    """Why the source cannot use ``path`` (judged by its first two frames), or "" where it can.

    Two identical frames are checked against PyAV (``_repeat_check``): they may be a buffer never written.
    """
    cap = open_capture(path, threads=1)
    try:
        if not cap.isOpened():
            return read_problem(path) or NO_OPEN.format("OpenCV")
        if next(grab_frames(cap, max_failed), None) is None:
            return NO_FRAME
        if (first := retrieve(cap)) is None:
            return NO_CONVERT
        second = retrieve(cap) if cap.grab() else None  # a clip of one frame, or a failed read: nothing to compare
        return UNWRITTEN if second is not None and unwritten(path, first, second, max_failed) else ""
    finally:
        cap.release()


def read(
    path: str, step: int, end: float, *, stride: int, threads: int, max_failed: int, scan: Callable[[], Scan | None]
) -> Frames:
    """Steps ``step`` (< ``end``) to ``end``, one frame of every ``stride``; a frame that does not convert ends
    the stream with a warning. ``scan()`` gives the file's scan, where one is known, for seeking."""
    if (pos := _seek(path, step * stride, threads, max_failed, scan)) is None:
        return
    cap, clock, ms, frames, frame = pos
    try:
        while True:
            if frame is None:
                frame = retrieve(cap)
                if frame is None:
                    warnings.warn(cut_warning(path, step * stride), stacklevel=3)
                    return
            yield frame, ms
            step += 1
            if step >= end:
                return
            # Advance to the next kept frame, grabbing (not converting) the ones stride skips.
            for _ in range(stride):
                pos_ms = next(frames, None)
                if pos_ms is None:
                    return
                ms = clock(pos_ms)
            frame = None
    finally:
        cap.release()


def _seek(
    path: str, target: int, threads: int, max_failed: int, find_scan: Callable[[], Scan | None]
) -> _Position | None:
    """A capture positioned on frame ``target`` (grabbed), its clock and time, and the rest of its frames;
    ``None`` when the file has no frame ``target``.

    With a scan of the file, seek by index and check the time and pixels against the scan; without
    one, or when the check fails, decode from the start and discard (exact, but slower).
    """
    scan = find_scan()
    if target > 0 and scan is not None and scan.seekable and target < scan.frames:
        cap = open_capture(path, threads)
        cap.set(cv2.CAP_PROP_POS_FRAMES, target)
        frames = grab_frames(cap, max_failed, path)
        ms = next(frames, None)
        if ms is not None and ms == scan.pos_ms[target]:
            frame = retrieve(cap)
            if frame is not None and checksum(frame) == scan.adler[target]:
                clock = Clock(cap.get(cv2.CAP_PROP_FPS))
                clock.prev = ms  # the scan's times increase, so the clock passes them through
                return cap, clock, ms, frames, frame
        cap.release()
    cap = open_capture(path, threads)
    clock = Clock(cap.get(cv2.CAP_PROP_FPS))
    frames = grab_frames(cap, max_failed, path)
    t = 0.0
    for _ in range(target + 1):
        ms = next(frames, None)
        if ms is None:
            cap.release()
            return None
        t = clock(ms)
    return cap, clock, t, frames, None
