"""The decoders the video source's ``backend=`` picks from, and the two jobs each does for it: probe a file, and
read a stream from any step.

One place for the choice, so the source never names a backend's module: ``_read_opencv`` (the default) or
``_read_pyav``, imported only when chosen, since PyAV is an optional extra.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from streamcli.storage import urls
from streamcli_sources import _read_opencv
from streamcli_sources._read_opencv import Frames
from streamcli_sources._scan_record import Scan

BACKENDS = {"opencv": "OpenCV", "pyav": "PyAV"}
"""The decoders ``backend=`` picks from, and the names messages give them."""


class Backend(Protocol):
    """What a backend module provides (``_read_opencv``, ``_read_pyav``)."""

    def probe(self, path: str, max_failed: int) -> str: ...

    def read(
        self,
        path: str,
        step: int,
        end: float,
        *,
        stride: int,
        threads: int,
        max_failed: int,
        scan: Callable[[], Scan | None],
    ) -> Frames: ...


def check(backend: str) -> None:
    """Refuse a backend that is not one of ``BACKENDS``, or whose package is not installed."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} must be one of {', '.join(BACKENDS)} (opencv is the default)")
    if backend == "pyav" and importlib.util.find_spec("av") is None:
        raise ImportError("backend='pyav' needs PyAV (the av package): pip install 'streamcli[pyav]'")


def load(backend: str) -> Backend:
    if backend == "pyav":
        from streamcli_sources import _read_pyav  # PyAV is an optional extra

        return _read_pyav
    return _read_opencv


def probe_files(files: list[str], backend: str, max_failed: int) -> dict[str, str]:
    """Why each of ``files`` cannot be used, judged by its first frame ("" where it can): the check made when
    there is no scan. Files are probed in parallel; an object in the cache, pinned meanwhile."""
    decoder = load(backend)

    def probe(path: str) -> str:
        if urls.is_remote(path):
            from streamcli.storage.cache import default

            with default().pinned(path) as local:
                return probe(str(local))
        return decoder.probe(path, max_failed)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(zip(files, pool.map(probe, files), strict=True))
