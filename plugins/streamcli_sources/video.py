"""``video``: every video file under a folder, decoded with OpenCV (FFmpeg), one frame per step.

Real files are messy, so nothing in a header is trusted: frame counts come from decoding (``scan``),
times from each frame's container timestamp, and a file OpenCV cannot open is skipped with a warning.
``backend="pyav"`` decodes with PyAV instead (``_decode_pyav``: exact seeks, file-like objects); the two
count the same frames and deliver them in the same layout.

This module holds the source: its options, its items and steps. ``_video_files`` finds the files (and scans
objects through the cache), ``_video_backends`` picks the decoder, whose module (``_read_opencv``,
``_read_pyav``) probes files and reads, seeking, from any step; ``_video_problems`` words what is left out.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from streamcli.index import Index
from streamcli.source import BaseSource, Field, Step
from streamcli.storage import urls
from streamcli_sources import _indexed, _video_backends
from streamcli_sources._convert import INTERPOLATION, convert
from streamcli_sources._repeat_check import UNWRITTEN, pyav_frames_differ
from streamcli_sources._scan import Progress, cache_dir, load_scan, scan_files
from streamcli_sources._scan_record import Scan
from streamcli_sources._video_backends import BACKENDS as BACKENDS
from streamcli_sources._video_files import EXTENSIONS as EXTENSIONS
from streamcli_sources._video_files import has_videos, list_files, scan_objects
from streamcli_sources._video_problems import cut_warning, refuse_or_warn, scan_problem

VideoItem = tuple[str, int, int]
"""(path, first step, number of steps or -1 when unknown): one item per file."""


class VideoSource(BaseSource):
    """Video files under a folder (searched recursively, sorted), one stream per file.

    Fields per step: ``frame`` uint8[3, H, W] in **RGB** order (uint8[1, H, W] with ``gray=True``), and
    ``time_ms`` float64, the frame's container timestamp (``CAP_PROP_POS_MSEC``); where a container gives
    no usable time (0 or going backwards, as in some MPEG-1 streams), it is extrapolated by the last frame
    interval, or by ``1000 / fps`` (see ``_decode.Clock``).

    Options: ``size=(H, W)``; ``gray``; ``stride`` (keep every n-th frame); ``segment=N`` is the old
    spelling of the loader's own option (``StreamLoader(..., segment=N)``, ``--segment N``), which now does
    the cutting for every source: given here, it becomes the loader's default (``default_segment``) and
    implies ``scan``, so the segments of a long clip spread over all rows;
    ``scan=True`` decodes every file once, in parallel, and caches the counts, so lengths (and
    ``len(loader)``) are known; ``glob`` selects files by pattern instead of by extension (``EXTENSIONS``:
    camcorder, DVD and broadcast files included), and a file given directly is used whatever its name;
    ``interpolation`` is ``linear`` (default: far cheaper than ``area``, at the price of some aliasing on
    large downscales), ``area`` or ``nearest``;
    ``threads`` is FFmpeg's decoder threads per clip: 1 (the default) gives the same frames on every run,
    0 is OpenCV's automatic choice, which may not.
    ``backend`` is the decoder: ``opencv`` (the default) or ``pyav`` (the ``streamcli[pyav]`` extra), which
    seeks exactly where a scan gives frame times (see ``_decode_pyav``); both count the same frames.
    A file OpenCV cannot open, with no decodable frame, or whose first frame FFmpeg cannot convert to RGB,
    is skipped with a warning and listed in ``skipped``; with ``strict=True`` it is an error. A stream ends,
    with a warning, at a later frame that does not convert: its pixels were never written.
    What the user pointed at is checked by ``items()``: an empty folder, one with no usable video, or an
    empty or undecodable file given directly raises ``ValueError`` (bad input); ``SourceError`` is kept for
    failures while reading.

    Args:
        folder: a video file or a folder of them (searched recursively), or their URL.
        size: frame size ``(H, W)`` the frames are resized to, e.g. ``64x64`` on the command line.
        gray: one grey channel instead of RGB.
        stride: keep every n-th frame.
        segment: the old spelling of the loader's ``segment`` (``--segment N``): cut clips into streams of N steps.
        scan: decode every file once (in parallel, cached) so stream lengths are known.
        glob: select files by pattern instead of by extension.
        interpolation: resizing: ``linear``, ``area`` (sharper on large downscales, slower) or ``nearest``.
        strict: a file that cannot be decoded is an error instead of being skipped with a warning.
        threads: FFmpeg decoder threads per clip (1 gives the same frames on every run; 0: OpenCV's choice).
        max_failed_reads: end a stream after this many failed frame reads in a row.
        cache_dir: the cache folder for scans. Default: ``$STREAMCLI_CACHE_DIR`` or ``~/.cache/streamcli``.
        backend: the decoder: ``opencv``, or ``pyav`` (pip install 'streamcli[pyav]'), which seeks exactly.
        index: ``auto`` takes the files and lengths from the folder's index (``streamcli index video PATH``): no
            listing, probe or scan at start-up; ``none`` lists the folder; or the path or URL of an index.
    """

    costly_steps = True  # decoding: with workers, rows go to whichever worker is free (``StreamLoader(balance=)``)

    def __init__(
        self,
        folder: str | os.PathLike[str] | None = None,
        *,
        size: tuple[int, int] | int = (128, 128),
        gray: bool = False,
        stride: int = 1,
        segment: int = 0,
        scan: bool = False,
        glob: str = "",
        interpolation: str = "linear",
        strict: bool = False,
        threads: int = 1,
        max_failed_reads: int = 5,
        cache_dir: str = "",
        backend: str = "opencv",
        index: str = "auto",
    ) -> None:
        if folder is None:
            raise ValueError("the video source needs a folder or file of videos, e.g. video clips/")
        hw = (size, size) if isinstance(size, int) else tuple(size)
        if len(hw) != 2 or any(int(d) < 1 for d in hw):
            raise ValueError(f"size={size!r} must be two positive ints (H, W), e.g. size=(128, 128)")
        if int(stride) < 1:
            raise ValueError(f"stride={stride} must be at least 1 (1 keeps every frame)")
        if int(segment) < 0:
            raise ValueError(f"segment={segment} must be 0 (whole files) or a number of steps per stream")
        if interpolation not in INTERPOLATION:
            raise ValueError(f"interpolation={interpolation!r} must be one of {', '.join(INTERPOLATION)}")
        if int(max_failed_reads) < 1:
            raise ValueError(f"max_failed_reads={max_failed_reads} must be at least 1")
        if int(threads) < 0:
            raise ValueError(f"threads={threads} must be a number of decoder threads (1: reproducible) or 0 (auto)")
        _video_backends.check(backend)
        self.url = str(folder) if urls.is_remote(folder) else None  # objects are decoded from the local cache
        if self.url is not None:
            urls.check(self.url)  # its backend is installed, or a clear error naming the fix
        self.root = Path(urls.local_path(folder) if self.url is None else urls.name(self.url))
        if self.url is None and not (self.root.is_dir() or self.root.is_file()):
            raise ValueError(f"{str(self.root)!r} is neither a folder nor a file of videos; check the path")
        if self.url is None and self.root.is_file() and self.root.stat().st_size == 0:
            raise ValueError(f"{str(self.root)!r} is empty (0 bytes); give a video file or a folder of them")
        self.size = (int(hw[0]), int(hw[1]))
        self.gray = bool(gray)
        self.stride = int(stride)
        self.segment = int(segment)
        self.scan_lengths = bool(scan) or self.segment > 0
        self.glob = glob
        self.interpolation = interpolation
        self.strict = bool(strict)
        self.threads = int(threads)
        self.max_failed_reads = int(max_failed_reads)
        self.cache_dir = cache_dir
        self.backend = backend
        self.skipped: list[tuple[str, str]] = []
        self._items: list[VideoItem] | None = None
        self._scans: dict[str, Scan] = {}
        self.streamcli_index = _indexed.find("video", folder, index, self.index_settings())
        if self.streamcli_index is not None:
            self.use_index(self.streamcli_index)

    def index_settings(self) -> dict[str, Any]:
        """The options that decide the files and their lengths (an index written with others is stale)."""
        names = {"glob": "glob", "stride": "stride", "scan": "scan_lengths", "backend": "backend"}
        names |= {"max_failed_reads": "max_failed_reads", "strict": "strict"}
        return {key: getattr(self, attr) for key, attr in names.items()}

    def index_key(self, item: VideoItem) -> str:
        return item[0]

    def use_index(self, index: Index) -> list[VideoItem]:
        """The files and lengths of ``index`` (files that failed were left out when it was written)."""
        self._items = [(p, 0, n) for p, n in zip(index.items, index.lengths.tolist(), strict=True)]
        return self._items

    # -- discovery -------------------------------------------------------------------------------------

    def files(self) -> list[str]:
        """The candidate files, sorted: by ``glob`` if given, else by extension. Under a URL, the matching objects'
        URLs: each is fetched into the local cache (``storage.cache``: shared between processes, bounded, least
        recently used first out) only when it is probed, scanned or opened, and pinned there until it is closed, so
        a cache smaller than the data loses nothing. An object larger than the cache's limit is refused here,
        before any is fetched (``CacheTooSmallError``)."""
        return list_files(self.root, self.url, self.glob)

    def scan(self, progress: Progress | None = None) -> dict[str, int]:
        """Decode every file once (in parallel, cached) and return its exact number of frames.

        ``progress(done, total)`` reports files done (cached ones at once); ``items()`` then reuses this
        scan, so a caller that shows progress calls ``scan(progress)`` first.
        """
        files = self.files()
        folder = cache_dir(self.cache_dir)
        scan = scan_files if self.url is None else scan_objects  # objects: each pinned in the cache meanwhile
        self._scans = scan(
            files, max_failed=self.max_failed_reads, folder=folder, progress=progress, backend=self.backend
        )
        return {p: s.frames for p, s in self._scans.items()}

    def prepare(self, progress: Progress | None = None) -> None:
        """The length scan, if ``scan`` (or ``segment``) asks for one, reporting files done of total."""
        if self.scan_lengths and self._items is None:
            self.scan(progress)

    def items(self) -> list[VideoItem]:
        if self._items is None:
            self._items = self._find_items()
        return self._items

    def _find_items(self) -> list[VideoItem]:
        files = self.files()
        if not files:
            what = f"no file matches glob={self.glob!r}" if self.glob else "no file with a video extension"
            raise ValueError(
                f"{what} under {str(self.root)!r}; point at a folder of videos (.mp4, .mkv, .mts, ...)"
                + ("" if self.glob else ", or pass glob='*.EXT' for other names")
            )
        if self.scan_lengths:
            if not all(p in self._scans for p in files):  # else scan() has just run
                self.scan()
            decoder = BACKENDS[self.backend]
            problems = {p: scan_problem(p, s, decoder) for p, s in self._scans.items() if not s.frames}
            if self.backend == "opencv":  # two identical first frames: real, or a buffer never written?
                twins = [p for p, s in self._scans.items() if s.frames > 1 and s.adler[0] == s.adler[1]]
                problems.update({p: UNWRITTEN for p in twins if pyav_frames_differ(p, self.max_failed_reads)})
            for p, s in self._scans.items():
                if s.frames and s.cut:
                    warnings.warn(cut_warning(p, s.frames), stacklevel=3)
        else:
            probes = _video_backends.probe_files(files, self.backend, self.max_failed_reads)
            problems = {p: why for p, why in probes.items() if why}
        self.skipped = [(p, problems[p]) for p in files if p in problems]
        named = str(self.root) if self.url is None and self.root.is_file() else None
        refuse_or_warn(self.skipped, named=named, strict=self.strict, decoder=BACKENDS[self.backend])
        items: list[VideoItem] = []
        for path in files:
            if path in problems:
                continue
            steps = self._steps(path)
            items.append((path, 0, -1 if steps is None else steps))
        if not items:
            n = len(self.skipped)
            raise ValueError(
                f"no usable video under {str(self.root)!r}: {n} file{'s' * (n != 1)} found, none decodes (see the "
                f"warnings); point at a folder with at least one video {BACKENDS[self.backend]} can decode"
            )
        return items

    def _steps(self, path: str) -> int | None:
        scan = self._scans.get(path)
        return None if scan is None else -(-scan.frames // self.stride)

    # -- the contract ----------------------------------------------------------------------------------

    def fields(self) -> Sequence[Field]:
        h, w = self.size
        return (
            Field("frame", (1 if self.gray else 3, h, w), "uint8", display="image"),
            Field("time_ms", (), "float64", display="other"),
        )

    def length(self, item: VideoItem) -> int | None:
        return None if item[2] < 0 else item[2]

    def item_name(self, item: VideoItem) -> str:
        return Path(item[0]).name

    def default_segment(self) -> int:
        """``segment=N`` given to the source: the loader cuts every file into streams of N steps."""
        return self.segment

    def setup_worker(self) -> None:
        # W workers x FFmpeg's automatic threads would oversubscribe W cores; RESULTS.md (Sources) measures it.
        cv2.setNumThreads(1)
        if self.threads == 0:
            self.threads = 1

    @classmethod
    def can_open(cls, arg: str) -> bool:
        return has_videos(arg)

    def open(self, item: VideoItem, start: int = 0) -> Iterator[Step]:
        path, first, count = item
        if urls.is_remote(path):  # an object: fetched now, decoded from the cache, pinned until the stream closes
            from streamcli.storage.cache import default

            with default().pinned(path) as local:
                yield from self.open((str(local), first, count), start)
            return
        step = first + start
        end = math.inf if count < 0 else first + count
        if step >= end:
            return
        frames = _video_backends.load(self.backend).read(
            path,
            step,
            end,
            stride=self.stride,
            threads=self.threads,
            max_failed=self.max_failed_reads,
            scan=lambda: self._scan_of(path),
        )
        try:
            for bgr, ms in frames:
                yield {"frame": convert(bgr, self.size, self.gray, self.interpolation), "time_ms": np.float64(ms)}
        finally:
            frames.close()  # releases the decoder now, not when the generator is collected

    # -- decoding --------------------------------------------------------------------------------------

    def _scan_of(self, path: str) -> Scan | None:
        scan = self._scans.get(path)
        if scan is None and self.scan_lengths:  # a worker given the source before items() ran
            scan = load_scan(cache_dir(self.cache_dir), path, self.backend)
        return scan
