"""Why the video source leaves a file out, or ends a stream early, and what it does about a file it leaves out.

Separate because the source and both its backends (``_read_opencv``, ``_read_pyav``) give these reasons, so each
reads the same whichever decoder found it; below all three.
"""

from __future__ import annotations

import warnings

from streamcli.errors import SourceError
from streamcli.storage import urls
from streamcli_sources._scan_record import Scan

NO_OPEN = "{} cannot open it (not a video, or no video track)"
NO_FRAME = "no frame decodes"
NO_CONVERT = (
    "FFmpeg decodes its frames but cannot convert them to RGB (interlaced DV, for one), so their pixels would "
    "differ on every read"
)


def read_problem(path: str) -> str:
    """Why ``path`` cannot be read at all ("permission denied", ...), or "" where it can.

    OpenCV says only that it cannot open a file, which reads as "not a video" whatever the cause.
    """
    if urls.is_remote(path):
        return ""  # an object is read whole into the cache, or fails there naming its URL
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as exc:
        return f"cannot read it: {(exc.strerror or str(exc)).lower()}"
    return ""


def scan_problem(path: str, scan: Scan, decoder: str) -> str:
    """Why a scanned file with no frame is skipped."""
    if not scan.opened:
        return read_problem(path) or NO_OPEN.format(decoder)
    return NO_CONVERT if scan.cut else NO_FRAME


def cut_warning(path: str, frame: int) -> str:
    return (
        f"video: {path}: ends at frame {frame}, which FFmpeg decodes but cannot convert to RGB; "
        "the frames from there on are left out (their pixels would differ on every read)"
    )


def refuse_or_warn(skipped: list[tuple[str, str]], *, named: str | None, strict: bool, decoder: str) -> None:
    """What the source does with the files it leaves out (``(path, why)``): the one file the user named (``named``)
    is bad input, ``ValueError``; with ``strict``, any is a ``SourceError``; else each is a warning."""
    if named is not None and skipped:  # their input, not the data
        why = skipped[0][1]
        if why.startswith("cannot read"):
            raise ValueError(f"{named!r}: {why}; check its permissions, or give another file")
        raise ValueError(
            f"{named!r} is not a video this {decoder} can decode: {why}; give a video file or a folder of them"
        )
    for path, why in skipped:
        if strict:
            raise SourceError(f"video: cannot use {path}: {why} (strict=True; remove it or drop strict)")
        warnings.warn(f"video: skipping {path}: {why}", stacklevel=4)  # the caller of ``VideoSource.items``
