"""The interlaced NTSC DV clip of tests/data, whose frames one OpenCV wheel converts and another does not.

The opencv-python-headless wheel is not pinned, so a fresh clone gets the newest. OpenCV 5.1.0.95 (its FFmpeg's
libswscale 10.1) converts the clip's yuv411p frames to BGR: three real frames. OpenCV 5.0.0.93 (libswscale 9.5,
FFmpeg 8.0) logs a conversion error for each and hands out one unwritten buffer, the same bytes three times; the
video source sees the error and skips the clip (``_decode``). Both were checked on the same AMD EPYC host: the
CPU does not decide it, the wheel does. The tests that read the clip ask the installed OpenCV which it is, and
check the right outcome for each; both outcomes are also forced on any host (``test_video_determinism.py``).
"""

from __future__ import annotations

import functools

from conftest import data_root
from streamcli_sources import _decode

DV = data_root("video") / "odd" / "realshort_ntsc.dv"
DV_NAME = "odd/realshort_ntsc.dv"
DV_FRAMES = 3  # made with ffmpeg -frames:v 3 (tests/data/README.md): the clip ends there


@functools.cache
def opencv_converts_dv() -> bool:
    """Whether this host's OpenCV converts the DV clip's first frame (no converter error in FFmpeg's log)."""
    cap = _decode.open_capture(str(DV), 1)
    try:
        return bool(cap.grab()) and _decode.retrieve(cap) is not None
    finally:
        cap.release()


def opencv_skips_dv() -> set[str]:
    """``{DV_NAME}`` where the video source (OpenCV) skips the clip on this host, else the empty set."""
    return set() if opencv_converts_dv() else {DV_NAME}
