"""Which files a video source reads, local or remote: the extensions that pick them, the listing of a folder or
of a URL's objects, and the scan of objects a few at a time through the local cache.

Separate from the source because it decides what there is to decode, and how objects pass through a cache that
may be smaller than the data; the decoding itself is the backends' (``_read_opencv``, ``_read_pyav``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from streamcli_sources._scan import Progress, scan_files
from streamcli_sources._scan_record import Scan

# What the FFmpeg bundled with opencv-python demuxes *and* has a video decoder for (checked against its
# demuxer and decoder lists). FFmpeg sniffs the content, so the name only picks candidates: ``glob=`` or a
# file given directly bypasses this list. A sorted tuple, as before, so ``str.endswith(EXTENSIONS)`` works.
EXTENSIONS = tuple(
    sorted(
        {
            *(".avi", ".divx", ".flv", ".f4v", ".m4v", ".mkv", ".mk3d", ".mov", ".qt", ".mp4", ".webm", ".wmv"),
            *(".asf", ".nut", ".ogv", ".ogm", ".rm", ".rmvb", ".3gp", ".3g2", ".mj2", ".ivf", ".wtv", ".y4m"),
            # MPEG program and transport streams: DVD (.vob), camcorders (.mod, .tod, .mts, .m2ts), broadcast
            *(".mpeg", ".mpg", ".m2p", ".vob", ".mod", ".tod", ".ts", ".m2t", ".mts", ".m2ts", ".trp"),
            # DV camcorders and broadcast (MXF, GXF)
            *(".dv", ".dif", ".mxf", ".gxf"),
            # elementary streams with no container
            *(".m1v", ".m2v", ".mpv", ".h264", ".264", ".avc", ".hevc", ".h265", ".265", ".vc1", ".obu"),
            *(".mjpeg", ".mjpg"),
        }
    )
)


def list_files(root: Path, url: str | None, glob: str) -> list[str]:
    """The candidate files under ``root`` (or the objects under ``url``), as ``VideoSource.files`` describes."""
    if url is not None:
        from streamcli.storage.cache import default
        from streamcli.storage.remote import find_sizes

        objects = find_sizes(url, glob or "*")
        if not glob:
            objects = {u: n for u, n in objects.items() if Path(u).suffix.lower() in EXTENSIONS}
        cache = default()
        for u, n in objects.items():
            cache.check_fits(u, n)
        return list(objects)
    if root.is_file():
        return [str(root)]
    found = root.rglob(glob) if glob else (p for p in root.rglob("*") if p.suffix.lower() in EXTENSIONS)
    return sorted(str(p) for p in found if p.is_file())


def has_videos(arg: str) -> bool:
    """Whether ``arg`` is a file with a video extension, or a folder holding one."""
    p = Path(arg)
    if p.is_file():
        return p.suffix.lower() in EXTENSIONS
    return p.is_dir() and any(q.suffix.lower() in EXTENSIONS for q in p.rglob("*"))


def scan_objects(
    objects: list[str], *, max_failed: int, folder: Path, progress: Progress | None, backend: str
) -> dict[str, Scan]:
    """The scans of objects: a few at a time (as many as decode in parallel), each pinned in the cache while it
    is scanned, so the cache never needs to hold them all."""
    from streamcli.storage.cache import default

    cache, out = default(), {}
    step = os.cpu_count() or 1
    for i in range(0, len(objects), step):
        group = objects[i : i + step]
        with contextlib.ExitStack() as pins:
            local = {str(pins.enter_context(cache.pinned(u))): u for u in group}

            def done(n: int, total: int, base: int = i) -> None:
                if progress is not None:
                    progress(base + n, len(objects))

            found = scan_files(list(local), max_failed=max_failed, folder=folder, progress=done, backend=backend)
        out.update({local[p]: s for p, s in found.items()})
    return out
