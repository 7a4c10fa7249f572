"""One decode loop for video files, shared by the video source and its length scan.

Both must agree frame for frame, so what counts as a frame and what its time is are defined here only:
a frame is a successful ``grab()``; a run of ``max_failed`` failed grabs ends the stream (one failure is
not always the end: some Theora files fail their first read, then decode fine).

A frame that FFmpeg decodes but cannot convert to BGR ends the stream too (``retrieve``). OpenCV reports
success for it and returns a buffer the converter never filled: with FFmpeg 8, every frame of an
interlaced NTSC DV clip ("Cannot convert interlaced to progressive frames ... yuv411p -> bgr24"). Its
pixels are whatever that memory held, so they may differ on every read. The failure is seen in FFmpeg's
log, through a callback on OpenCV's own libavutil. Ending the stream there, rather than leaving the frame
out, keeps frame k the same frame in a full read, a scan and a resume that seeks past earlier frames
without converting them.

Decoding is single-threaded unless a caller asks otherwise (``threads``): one decoder thread gives the
same frames on every run whatever the timing, in the main process as in workers.

It also keeps OpenCV's and FFmpeg's own messages (``moov atom not found``, ``[ WARN:0@0.07] global
cap.cpp...``, ``[h264 @ 0x...] missing picture``) off the terminal: a skipped file is reported once, as a
Python warning, by the source. ``STREAMCLI_NATIVE_LOG=1`` (set by the CLI's ``--debug``) lets them through.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

# FFmpeg's interrupt callback honours these for files too, so a stalled read cannot hang a worker.
_TIMEOUT_MS = 20_000
NATIVE_LOG_ENV = "STREAMCLI_NATIVE_LOG"
_AV_LOG_QUIET = -8
_AV_LOG_ERROR = 16
_quiet_done = False
_quiet_lock = threading.Lock()  # scans open captures from several threads at once
_LogCallback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_watcher: Any = None  # the installed callback, kept alive for as long as FFmpeg may call it
_watch_done = False
_converting = threading.local()  # .failed: the converter logged an error in this thread since the last retrieve


def quiet_native_logs() -> None:
    """Silence OpenCV's and its FFmpeg's logs in this process (once), unless ``$STREAMCLI_NATIVE_LOG`` is set.

    Process-wide, as both libraries' levels are: OpenCV's level goes to SILENT (unless ``$OPENCV_LOG_LEVEL``
    is set), FFmpeg's to quiet (unless ``$OPENCV_FFMPEG_LOGLEVEL`` or ``$OPENCV_FFMPEG_DEBUG`` is set).
    OpenCV reads ``OPENCV_FFMPEG_LOGLEVEL`` at its first FFmpeg capture in the process only, so where one
    was opened before, the level is also set directly in OpenCV's own copy of libavutil (Linux).
    Worker processes inherit the variable and call this again before their first capture.
    """
    global _quiet_done
    if _quiet_done:
        return
    with _quiet_lock:
        if _quiet_done or os.environ.get(NATIVE_LOG_ENV, "") not in ("", "0"):
            _quiet_done = True
            return
        if "OPENCV_LOG_LEVEL" not in os.environ:
            cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
        if "OPENCV_FFMPEG_LOGLEVEL" not in os.environ and "OPENCV_FFMPEG_DEBUG" not in os.environ:
            os.environ["OPENCV_FFMPEG_LOGLEVEL"] = str(_AV_LOG_QUIET)
            for lib in _opencv_libavutil():
                try:
                    ctypes.CDLL(lib).av_log_set_level(_AV_LOG_QUIET)
                except (OSError, AttributeError):  # not the libavutil we expect: the variable still applies
                    continue
        _quiet_done = True


def _opencv_libavutil() -> list[str]:
    """The libavutil that the opencv-python wheel bundles, as mapped into this process (Linux only)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libavutil" in line and "/opencv" in line}
    except OSError:
        return []
    return sorted(paths)


def _class_name(avcl: int) -> bytes | None:
    """The ``AVClass`` name of an FFmpeg context (its first member points to its class, whose first is the name)."""
    cls = ctypes.c_void_p.from_address(avcl).value
    return ctypes.c_char_p.from_address(cls).value if cls else None


def _watch_conversions() -> None:
    """Install (once) a log callback that notes, per thread, an error from FFmpeg's converter (swscale).

    Called after the first capture is opened: OpenCV sets its own callback when it initialises FFmpeg, and
    this one must come after it. It hands every message on to FFmpeg's default printer, which prints only
    what the level allows: nothing unless native logs are asked for (``--debug``).
    """
    global _watcher, _watch_done
    if _watch_done:
        return
    with _quiet_lock:
        if _watch_done:
            return
        _watch_done = True
        libs = _opencv_libavutil()
        if not libs:  # not Linux, or not the opencv-python wheel: conversion failures go unseen
            return
        try:
            avutil = ctypes.CDLL(libs[0])
            forward = avutil.av_log_default_callback
        except (OSError, AttributeError):
            return
        forward.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p]

        def on_log(avcl: int | None, level: int, fmt: bytes, args: int | None) -> None:
            if level <= _AV_LOG_ERROR and avcl and _class_name(avcl) == b"SWScaler":
                _converting.failed = True
            forward(avcl, level, fmt, args)  # FFmpeg's own printer, which honours the level set above

        _watcher = _LogCallback(on_log)
        avutil.av_log_set_callback(_watcher)


def open_capture(path: str, threads: int) -> Any:
    """A ``cv2.VideoCapture`` on the FFmpeg backend (never another: results must not depend on the host).

    ``threads`` > 0 sets FFmpeg's decoder threads; 0 keeps OpenCV's default (automatic, not reproducible).
    """
    quiet_native_logs()
    params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, _TIMEOUT_MS, cv2.CAP_PROP_READ_TIMEOUT_MSEC, _TIMEOUT_MS]
    if threads > 0:
        params += [cv2.CAP_PROP_N_THREADS, threads]
    cap = cv2.VideoCapture(path, cv2.CAP_FFMPEG, params)
    _watch_conversions()
    return cap


def declared_frames(frames: float, duration_s: float = 0.0, fps: float = 0.0) -> int:
    """The frame count a container declares: its own count, else its duration x fps as OpenCV reckons it;
    0 where it declares nothing usable (0, negative or absurd counts are common in real files)."""
    n = frames if math.isfinite(frames) and frames > 0 else 0.0
    if not n and math.isfinite(duration_s) and duration_s > 0 and math.isfinite(fps) and 0 < fps <= 1000:
        n = math.floor(duration_s * fps + 0.5)
    return int(n) if n < 1e9 else 0


def short_clip_warning(name: str, decoded: int, declared: int) -> None:
    """Warn where a decode stopped well before the frames the container declares (a truncated or damaged
    file): the frames after ``decoded`` are missing. A frame or two short is common in whole files."""
    if decoded and declared and declared - decoded > max(1, declared // 100):  # none: the source skips the file
        warnings.warn(
            f"video: {name or 'a clip'}: decoding stopped at frame {decoded} of the {declared} its container "
            "declares: the file is truncated or damaged there, and the stream ends at that frame",
            RuntimeWarning,
            stacklevel=3,
        )


def retrieve(cap: Any) -> npt.NDArray[np.uint8] | None:
    """The frame just grabbed, in BGR; ``None`` if it did not decode or FFmpeg could not convert it."""
    _converting.failed = False
    ok, frame = cap.retrieve()
    if not ok or frame is None or _converting.failed:
        return None
    out: npt.NDArray[np.uint8] = frame
    return out


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


def grab_frames(cap: Any, max_failed: int, name: str = "") -> Iterator[float]:
    """Grab frames until ``max_failed`` consecutive failures; yields each frame's raw ``POS_MSEC``.

    The caller may ``cap.retrieve()`` the frame just grabbed before advancing the iterator. When the frames
    run out well before the container's declared count, a ``RuntimeWarning`` names the file (``name``) and the
    frame.
    """
    failed = 0
    while failed < max_failed:
        if not cap.grab():
            failed += 1
            continue
        failed = 0
        yield float(cap.get(cv2.CAP_PROP_POS_MSEC))
    # POS_FRAMES counts from the file's start, also after a seek; a failed grab does not move it.
    # Where a container counts no frames OpenCV reckons duration x fps, and an absurd fps (60000 for a 3-frame DV
    # clip) makes an absurd count: not a declaration to hold the decode to (as ``declared_frames``'s fps bound).
    fps = float(cap.get(cv2.CAP_PROP_FPS))
    declared = declared_frames(float(cap.get(cv2.CAP_PROP_FRAME_COUNT))) if 0 < fps <= 1000 else 0
    short_clip_warning(name, int(cap.get(cv2.CAP_PROP_POS_FRAMES)), declared)
