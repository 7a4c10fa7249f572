"""Whether OpenCV's byte-identical first frames are the clip's pixels or a buffer FFmpeg's converter never wrote.

Where FFmpeg decodes a frame but its converter fails, OpenCV still reports success and hands out its output
buffer as it was: the same bytes for every frame. ``_decode.retrieve`` sees the converter's error in FFmpeg's log;
this is the second line of defence, for a host where that error is not logged (or logged where the callback does
not look). Identical frames are common in real clips (a still shot, duplicated frames), so they are never refused
on their own: PyAV decodes the same two frames with its own FFmpeg, and only where its two differ are OpenCV's
refused. Without PyAV (an optional extra) the frames are kept: nothing says they are not real.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

UNWRITTEN = (
    "OpenCV gives the same bytes for its first two frames where PyAV decodes two different ones: a buffer FFmpeg's "
    "converter never wrote, not the clip's pixels (try backend='pyav')"
)


def pyav_frames_differ(path: str, max_failed: int = 5) -> bool:
    """Whether PyAV decodes ``path``'s first two frames to different pixels (or cannot convert them, where OpenCV
    returned bytes for them). False where PyAV is not installed, cannot open the file or finds one frame only."""
    try:
        from streamcli_sources._decode_pyav import open_video
    except ImportError:
        return False
    video = open_video(path, threads=1, max_failed=max_failed)
    if video is None:
        return False
    got: list[npt.NDArray[np.uint8] | None] = []
    with video:
        for frame in video.frames():
            got.append(video.bgr(frame))
            if len(got) == 2:
                break
    if len(got) < 2:
        return False
    first, second = got
    return first is None or second is None or not np.array_equal(first, second)


def unwritten(path: str, first: npt.NDArray[np.uint8], second: npt.NDArray[np.uint8], max_failed: int = 5) -> bool:
    """Whether OpenCV's first two frames of ``path`` are one unwritten buffer: the same bytes, where PyAV's differ."""
    return np.array_equal(first, second) and pyav_frames_differ(path, max_failed)
