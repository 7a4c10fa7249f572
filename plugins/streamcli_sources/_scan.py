"""Exact frame counts of video files: decode each file once, in parallel, and cache the result on disk.

A scan records, per decodable frame, its raw container time and an Adler-32 of the decoded BGR pixels.
The count gives exact lengths; the two tables let ``open(item, start=k)`` seek and then *verify* that it
landed on frame k (seeking by frame index is inexact for MPEG program streams and some H.264 files).

The cache holds one small JSON file per video, keyed by absolute path, size, mtime and decoder, under
``$STREAMCLI_CACHE_DIR`` or ``$XDG_CACHE_HOME/streamcli`` (default ``~/.cache/streamcli``). Files are
written to a temporary name and renamed, so concurrent scans never read a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import numpy as np

from streamcli_sources._decode import grab_frames, open_capture, retrieve
from streamcli_sources._scan_record import Scan, checksum

_VERSION = 2  # bump when the decode loop's notion of a frame changes (2: a frame that cannot convert ends it)
_log = logging.getLogger("streamcli")


def cache_dir(option: str = "") -> Path:
    """The cache folder: the option if given, else ``$STREAMCLI_CACHE_DIR``, else the XDG default."""
    if option:
        return Path(option)
    if env := os.environ.get("STREAMCLI_CACHE_DIR"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "streamcli"


def scan_file(path: str, max_failed: int) -> Scan:
    """Decode ``path`` once with the source's own loop (one decoder thread; scans run side by side)."""
    cap = open_capture(path, threads=1)
    pos: list[float] = []
    sums: list[int] = []
    opened = bool(cap.isOpened())
    cut = False
    try:
        if opened:
            for ms in grab_frames(cap, max_failed, path):
                frame = retrieve(cap)
                if frame is None:
                    cut = True
                    break
                pos.append(ms)
                sums.append(checksum(frame))
    finally:
        cap.release()
    return Scan(np.asarray(pos, np.float64), np.asarray(sums, np.uint32), opened, cut)


def _key(path: str, backend: str) -> tuple[Path, dict[str, object]]:
    st = os.stat(path)
    ident: dict[str, object] = {"path": os.path.abspath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    ident["v"] = _VERSION
    if backend != "opencv":  # OpenCV's entries keep the key they had before there was a second decoder
        ident["backend"] = backend
    name = hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    return Path(name + ".json"), ident


def load_scan(folder: Path, path: str, backend: str = "opencv") -> Scan | None:
    """The cached scan of ``path`` by ``backend`` if one exists for its current size and mtime."""
    name, ident = _key(path, backend)
    try:
        entry = json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return None
    if entry.get("key") != ident:
        return None
    pos, adler = np.asarray(entry["pos_ms"], np.float64), np.asarray(entry["adler"], np.uint32)
    return Scan(pos, adler, entry["opened"], entry["cut"])


def _store(folder: Path, path: str, scan: Scan, backend: str) -> None:
    name, ident = _key(path, backend)
    entry = {"key": ident, "frames": scan.frames, "pos_ms": scan.pos_ms.tolist()}
    entry.update(adler=scan.adler.tolist(), opened=scan.opened, cut=scan.cut)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entry, f)
            os.replace(tmp, folder / name)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError as exc:  # a read-only cache only costs a rescan next time
        _log.warning("streamcli: cannot write the video length cache in %s: %s", folder, exc)


Progress = Callable[[int, int], None]
"""``progress(done, total)``: files scanned so far (cached ones counted at once) out of all of them."""


def scan_files(
    paths: list[str],
    *,
    max_failed: int,
    folder: Path,
    workers: int = 0,
    progress: Progress | None = None,
    backend: str = "opencv",
) -> dict[str, Scan]:
    """Scans of ``paths``: from the cache where it is fresh, else decoded in parallel threads and cached.

    Threads suffice: OpenCV and PyAV release the GIL while they decode. ``progress`` is called from the
    calling thread: once after the cache is read, then as each decode finishes (in any order). ``backend``
    picks the decoder (``"pyav"``: ``_decode_pyav.scan_file``); each has its own cache entries.
    """
    scanner = scan_file
    if backend == "pyav":
        from streamcli_sources._decode_pyav import scan_file as scanner  # av is an optional extra
    out = {p: s for p in paths if (s := load_scan(folder, p, backend)) is not None}
    todo = [p for p in paths if p not in out]
    if progress is not None:
        progress(len(out), len(paths))
    if not todo:
        return out
    pool = ThreadPoolExecutor(max_workers=workers or min(len(todo), os.cpu_count() or 1))
    try:
        futures = {pool.submit(scanner, p, max_failed): p for p in todo}
        for future in as_completed(futures):
            p, s = futures[future], future.result()
            out[p] = s
            if s.opened:  # a file that did not open (unreadable, for one) may open once fixed: mtime won't say
                _store(folder, p, s, backend)
            if progress is not None:
                progress(len(out), len(paths))
    finally:
        # A failing callback (or Ctrl-C) must not wait for the files not started yet.
        pool.shutdown(wait=True, cancel_futures=True)
    return out
