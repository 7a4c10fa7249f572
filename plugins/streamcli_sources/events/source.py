"""``events``: event-camera recordings, one stream each, one time window per step.

See the package docstring for the options; ``formats`` reads files, ``windows`` finds windows, ``sensor``
settles the grid they share, ``represent`` turns them into tensors. The source yields blocks of windows
(``block_steps``): a block is one contiguous read of events and one ``bincount``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamcli.errors import EventFileError, IndexFileError, UnsupportedURLError
from streamcli.index import Index as IndexFile
from streamcli.source import BaseSource, Field, Step
from streamcli.storage.urls import is_remote, local_path
from streamcli_sources import _indexed
from streamcli_sources.events import represent
from streamcli_sources.events.formats import SUFFIXES, Reader, kind
from streamcli_sources.events.readers import open_reader
from streamcli_sources.events.represent import REPRESENTATIONS, Spec
from streamcli_sources.events.sensor import sensor_size
from streamcli_sources.events.windows import Index, Windowing, check_coordinates, load_or_scan

DEFAULT_WINDOW_US = 50_000
_BLOCK_BYTES = 8 << 20  # the output of one block; enough windows to amortise a read, few enough to stay small
_MAX_BLOCK = 64


class EventsSource(BaseSource):
    """Event recordings (a file, or a folder searched recursively and sorted), one stream per recording.

    Args:
        path: an event file or a folder of them (``.npy``, ``.h5``/``.hdf5``, ``.raw`` EVT 2.0/3.0, ``.aedat4``,
            ``.dat``, ``.es``; see ``formats``).
        window_us: window length in µs. Default: 50000 (when ``events_per_window`` is not given).
        events_per_window: cut windows by event count instead of time.
        representation: ``histogram``, ``voxel``, ``time_surface`` or ``raw`` (see ``represent``).
        sensor_size: ``(height, width)``. Default: the files' own size where the format records one (all must
            agree), else the smallest size that holds every event of every recording, ``(max y + 1, max x + 1)``.
        downsample: integer factor: pixel ``(x, y)`` counts at ``(x // d, y // d)`` on a ``ceil(H/d) x ceil(W/d)``
            grid.
        bins: time bins of a voxel grid.
        tau_us: decay constant of a time surface (0: the window's length).
        capacity: rows of a ``raw`` window (required for ``raw``).
        overflow: ``raw`` windows with more events than ``capacity``: ``error`` or ``truncate`` (keep the first).
        dtype: dtype of histogram, voxel and time surface steps.
        glob: select files by pattern instead of by suffix.
        cache_dir: the cache folder (default: the video source's, ``$STREAMCLI_CACHE_DIR`` or ``~/.cache``).
        index: ``auto`` takes the recordings, lengths and sensor size from the folder's index (``streamcli index
            events PATH``): nothing is listed or scanned at start-up; ``none`` lists the folder; or an index's path.

    Fields per step: ``events`` (the representation) and ``time_us`` int64, the window's start (for count
    windows, its first event's time); ``raw`` adds ``count`` int32.
    """

    block_steps = True

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        window_us: int = 0,
        events_per_window: int = 0,
        representation: str = "histogram",
        sensor_size: tuple[int, int] | None = None,
        downsample: int = 1,
        bins: int = 5,
        tau_us: float = 0.0,
        capacity: int = 0,
        overflow: str = "error",
        dtype: str = "float32",
        glob: str = "",
        cache_dir: str = "",
        index: str = "auto",
    ) -> None:
        if path is None:
            raise ValueError("the events source needs an event file or a folder of them, e.g. events recordings/")
        if is_remote(str(path)):
            raise UnsupportedURLError(
                f"events: {str(path)!r} is a URL, and the events source reads local files only; download the "
                "recordings first (e.g. aws s3 cp --recursive URL DIR, or fsspec's get) and pass the local folder"
            )
        path = local_path(path)
        if int(window_us) < 0 or int(events_per_window) < 0:
            raise ValueError(f"{window_us=} and {events_per_window=} must be positive (or 0: not given)")
        if window_us and events_per_window:
            raise ValueError(f"give window_us={window_us} or events_per_window={events_per_window}, not both")
        if representation not in REPRESENTATIONS:
            raise ValueError(f"representation={representation!r} must be one of {', '.join(REPRESENTATIONS)}")
        if int(downsample) < 1 or int(bins) < 1:
            raise ValueError(f"{downsample=} and {bins=} must be at least 1")
        if representation == "raw" and int(capacity) < 1:
            raise ValueError("representation='raw' needs capacity=N, the most events a window holds (rows)")
        if overflow not in ("error", "truncate"):
            raise ValueError(f"overflow={overflow!r} must be 'error' or 'truncate'")
        if sensor_size is not None and (len(sensor_size) != 2 or min(int(d) for d in sensor_size) < 1):
            raise ValueError(f"sensor_size={sensor_size!r} must be two positive ints (height, width), e.g. (480, 640)")
        if not np.issubdtype(np.dtype(dtype), np.number):
            raise ValueError(f"dtype={dtype!r} must be a numeric dtype, e.g. float32 or uint16")
        self.root = Path(path)
        if not (self.root.is_dir() or self.root.is_file()):
            raise ValueError(f"{str(self.root)!r} is neither a folder nor an event file; check the path")
        if self.root.is_file() and not kind(self.root):
            raise ValueError(f"{str(self.root)!r} is not an event file the events source reads ({', '.join(SUFFIXES)})")
        per = int(events_per_window)
        self.windowing = Windowing(0 if per else int(window_us) or DEFAULT_WINDOW_US, per)
        self.representation = representation
        self.sensor_size = None if sensor_size is None else (int(sensor_size[0]), int(sensor_size[1]))
        self.downsample = int(downsample)
        self.bins, self.tau_us = int(bins), float(tau_us)
        self.capacity, self.overflow = int(capacity), overflow
        self.dtype = np.dtype(dtype).name
        self.glob = glob
        self.cache_dir = cache_dir
        self._index: dict[str, Index] = {}  # the scan's; workers re-read offsets from the cache
        self._lengths: dict[str, int] = {}
        self._files: Sequence[str] = []
        self._bad: dict[str, EventFileError] = {}  # recordings that are not whole: raised by length() and open()
        self._sensor_hw: tuple[int, int] = (0, 0)
        self._spec: Spec | None = None
        self.streamcli_index = _indexed.find("events", path, index, self.index_settings())
        if self.streamcli_index is not None:
            self.use_index(self.streamcli_index)

    def index_settings(self) -> dict[str, Any]:
        """The options that decide the recordings, their lengths and the sensor size (else the index is stale)."""
        w = self.windowing
        settings = {"glob": self.glob, "window_us": w.window_us, "events_per_window": w.per_window}
        return {**settings, "sensor_size": self.sensor_size}

    def index_info(self) -> dict[str, Any]:
        self.prepare()
        return {"sensor_hw": list(self._sensor_hw)}

    def use_index(self, index: IndexFile) -> Sequence[str]:
        """The recordings of ``index`` and the sensor size it recorded: nothing is listed or scanned here; a
        worker loads each recording's window offsets from the cache when it opens it."""
        hw = index.info.get("sensor_hw")
        if not (isinstance(hw, list) and len(hw) == 2 and all(isinstance(d, int) for d in hw)):
            raise IndexFileError(f"{index.where} does not record the sensor size; rebuild it with streamcli index")
        self._files = index.items
        self._settle((hw[0], hw[1]))
        return index.items

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_index"] = {}  # window offsets can be large: each worker loads the ones it opens
        return state

    # -- discovery and the scan ------------------------------------------------------------------------

    def files(self) -> list[str]:
        if self.root.is_file():
            return [str(self.root)]
        found = self.root.rglob(self.glob) if self.glob else (p for p in self.root.rglob("*") if kind(p))
        return sorted(str(p) for p in found if p.is_file())

    def prepare(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Index every recording (decoding vendor formats once), from the cache where it is fresh.

        A recording in a folder that is not whole (truncated, damaged, not its format) stays an item whose
        ``length()`` and ``open()`` raise its ``EventFileError``, so the loader's ``on_error`` decides: stop, or
        skip it with a warning. The one file the user named raises here."""
        if self._spec is not None:
            return
        files = self.files()
        if not files:
            what = f"no file matches glob={self.glob!r}" if self.glob else "no event file"
            raise ValueError(f"{what} under {str(self.root)!r}; point at {', '.join(SUFFIXES)} files")
        for i, path in enumerate(files):
            if progress is not None:
                progress(i, len(files))
            try:
                self._index[path] = load_or_scan(path, self.windowing, self.cache_dir)
            except EventFileError as exc:
                if self.root.is_file():
                    raise
                self._bad[path] = exc
        if progress is not None:
            progress(len(files), len(files))
        if not self._index:
            first = next(iter(self._bad.values()))
            raise EventFileError(f"no whole recording under {str(self.root)!r}; the first: {first}") from first
        self._files = files
        self._lengths = {p: ix.windows for p, ix in self._index.items()}
        self._settle(sensor_size(self._index, self.sensor_size))

    def _settle(self, hw: tuple[int, int]) -> None:
        """The sensor grid and the step shape on it."""
        self._sensor_hw = hw
        h, w, d = *hw, self.downsample
        self._spec = Spec(
            self.representation,
            -(-h // d),
            -(-w // d),
            d,
            self.bins,
            self.tau_us,
            self.capacity,
            self.overflow,
            self.dtype,
        )

    @property
    def spec(self) -> Spec:
        if self._spec is None:
            self.prepare()
        if self._spec is None:  # prepare() sets it or raises
            raise RuntimeError("events: the scan did not settle the step shape")
        return self._spec

    # -- the contract ----------------------------------------------------------------------------------

    def items(self) -> list[str]:
        self.prepare()
        return list(self._files)

    def fields(self) -> Sequence[Field]:
        spec = self.spec
        # Two polarity channels are not an image a viewer can show as such (1, 3 or 4 channels).
        out = [Field("events", spec.step_shape, spec.step_dtype, display="other"), Field("time_us", (), "int64")]
        if spec.name == "raw":
            out.append(Field("count", (), "int32", display="other"))
        return tuple(out)

    def length(self, item: str) -> int:
        self.prepare()
        if item in self._bad:
            raise self._bad[item]
        return self._lengths[item] if item in self._lengths else self._load_index(item).windows  # indexed: cached

    def item_name(self, item: str) -> str:
        return Path(item).name

    @classmethod
    def can_open(cls, arg: str) -> bool:
        p = Path(arg)
        return bool(kind(p)) if p.is_file() else p.is_dir() and any(kind(q) for q in p.rglob("*"))

    def block_windows(self) -> int:
        """Windows per block: about ``_BLOCK_BYTES`` of output, 1 to ``_MAX_BLOCK``."""
        spec = self.spec
        step = math.prod(spec.step_shape) * np.dtype(spec.step_dtype).itemsize
        return max(1, min(_MAX_BLOCK, _BLOCK_BYTES // max(1, step)))

    def open(self, item: str, start: int = 0) -> Iterator[Step]:
        """Blocks of windows from window ``start``: the index says where its events begin, so nothing before
        them is read."""
        index = self._load_index(item)
        n, size = index.windows, self.block_windows()
        if start >= n:
            return
        reader = open_reader(item, self.cache_dir)
        try:
            for k0 in range(start, n, size):
                yield self._windows(item, reader, index, k0, min(n, k0 + size))
        finally:
            reader.close()

    def windows(self, item: str, k0: int, k1: int) -> Step:
        """Windows ``[k0, k1)`` of ``item`` as one block, read directly: the random-access form of ``open``."""
        index = self._load_index(item)
        if not 0 <= k0 < k1 <= index.windows:
            raise IndexError(f"windows [{k0}, {k1}) of {item}: it has {index.windows}")
        reader = open_reader(item, self.cache_dir)
        try:
            return self._windows(item, reader, index, k0, k1)
        finally:
            reader.close()

    def _load_index(self, item: str) -> Index:
        if item in self._bad:
            raise self._bad[item]
        if item not in self._index:  # in a worker: from the cache the scan filled
            self._index[item] = load_or_scan(item, self.windowing, self.cache_dir)
        return self._index[item]

    def _windows(self, item: str, reader: Reader, index: Index, k0: int, k1: int) -> Step:
        spec = self.spec  # prepares, which settles the sensor size
        a = int(index.offsets[k0])
        ev = reader.read(a, int(index.offsets[k1]))
        # Checked on every read, not only by the scan: a pixel off the grid would land on another pixel's cell.
        check_coordinates(item, ev, a, self._sensor_hw)
        return represent.block(ev, index.offsets[k0 : k1 + 1] - a, index.t_first, k0, spec, self.windowing)
