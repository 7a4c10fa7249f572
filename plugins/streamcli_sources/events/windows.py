"""Windows of a recording and the index that finds them: event offsets per window, built once and cached.

Window k of a recording covers timestamps ``[t_first + k*window_us, t_first + (k+1)*window_us)``, where
``t_first`` is the recording's first timestamp; the last, partial window is included, and a window with no
event is an (all-zero) step like any other. With ``events_per_window=N`` instead, window k holds events
``[k*N, (k+1)*N)`` and the last one may hold fewer.

The index is ``offsets``: ``n_windows + 1`` event positions, so window k is events
``offsets[k]:offsets[k+1]``, found with ``np.searchsorted`` on ``t``. It is built in one pass over the
recording in bounded chunks (which also checks that ``t`` never decreases and finds the largest ``x`` and
``y``), stored in the cache folder, and read back by every ``open(item, start=k)``, which then reads only the
events from ``offsets[k]`` on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from streamcli.errors import EventFileError
from streamcli_sources.events import cache
from streamcli_sources.events.formats import Events, Reader
from streamcli_sources.events.readers import open_reader

_log = logging.getLogger("streamcli")
CHUNK = 1 << 22  # events per read while scanning: ~50 MB of columns, whatever the recording's size


@dataclass(frozen=True)
class Windowing:
    """How a recording is cut: fixed time windows (``window_us``) or fixed event counts (``per_window``)."""

    window_us: int = 0
    per_window: int = 0

    def n_windows(self, count: int, t_first: int, t_last: int) -> int:
        if count == 0:
            return 0
        if self.per_window:
            return -(-count // self.per_window)
        return (t_last - t_first) // self.window_us + 1

    def describe(self) -> str:
        return f"{self.per_window} events" if self.per_window else f"{self.window_us} µs"


@dataclass(frozen=True)
class Index:
    """One recording's windows: ``offsets`` (n_windows + 1) and what the scan learnt on the way."""

    offsets: npt.NDArray[np.int64]
    t_first: int
    t_last: int
    max_x: int  # -1 for an empty recording
    max_y: int
    sensor_size: tuple[int, int] | None  # from the file, where it records one

    @property
    def windows(self) -> int:
        return len(self.offsets) - 1

    @property
    def count(self) -> int:
        return int(self.offsets[-1])

    def to_arrays(self) -> dict[str, np.ndarray]:
        h, w = self.sensor_size or (-1, -1)
        meta = [self.t_first, self.t_last, self.max_x, self.max_y, h, w]
        return {"offsets": self.offsets, "meta": np.asarray(meta, np.int64)}

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> Index:
        """The index stored by ``to_arrays``; ``ValueError`` if the arrays are not one (a damaged cache entry)."""
        meta, offsets = np.asarray(a["meta"]), np.asarray(a["offsets"])
        if meta.shape != (6,) or offsets.ndim != 1 or not len(offsets) or offsets[0] != 0:
            raise ValueError(f"meta of shape {meta.shape}, offsets of shape {offsets.shape}")
        if len(offsets) > 1 and bool((np.diff(offsets) < 0).any()):
            raise ValueError("offsets that decrease")
        t_first, t_last, mx, my, h, w = (int(v) for v in meta)
        return cls(offsets.astype(np.int64), t_first, t_last, mx, my, None if h < 0 else (h, w))


class UnsortedError(EventFileError):
    """The timestamps of a recording go backwards somewhere."""


def check_coordinates(name: str, ev: Events, first: int, sensor: tuple[int, int] | None) -> None:
    """Raise ``EventFileError`` naming the first event of ``ev`` (numbered from ``first``) at a negative
    coordinate, or outside ``sensor`` (height, width) when given."""
    if not len(ev):
        return
    h, w = sensor if sensor is not None else (None, None)
    bad = (ev.x < 0) | (ev.y < 0)
    if h is not None and w is not None:
        bad |= (ev.x >= w) | (ev.y >= h)
    if not bad.any():
        return
    i = int(np.argmax(bad))
    x, y = int(ev.x[i]), int(ev.y[i])
    where = "a negative coordinate" if sensor is None else f"outside sensor_size=({h}, {w})"
    raise EventFileError(
        f"{name}: event {first + i} is at x={x}, y={y}, {where}; the file is damaged or was written for another "
        "sensor: drop or fix those events (or pass a sensor_size= that holds them)"
    )


def scan(reader: Reader, windowing: Windowing, name: str = "") -> Index:
    """Build ``reader``'s index in one chunked pass."""
    n = len(reader)
    if n == 0:
        return Index(np.zeros(1, np.int64), 0, 0, -1, -1, reader.sensor_size)
    t_first, t_last = int(reader.read(0, 1).t[0]), int(reader.read(n - 1, n).t[0])
    nw = windowing.n_windows(n, t_first, t_last)
    if windowing.per_window:
        offsets = np.minimum(np.arange(nw + 1, dtype=np.int64) * windowing.per_window, n)
        edges = None
    else:
        offsets = np.zeros(nw + 1, np.int64)
        edges = t_first + windowing.window_us * np.arange(nw + 1, dtype=np.int64)
    prev, mx, my = t_first, -1, -1
    for a in range(0, n, CHUNK):
        ev = reader.read(a, min(n, a + CHUNK))
        if ev.t[0] < prev or (len(ev) > 1 and bool((np.diff(ev.t) < 0).any())):
            bad = a + int(np.argmax(np.diff(np.concatenate([[prev], ev.t])) < 0))
            raise UnsortedError(
                f"{name}: event {bad} is earlier than the one before it; the events source needs events sorted by t "
                "(sort them once, e.g. np.sort(arr, order='t', kind='stable'))"
            )
        prev = int(ev.t[-1])
        check_coordinates(name, ev, a, None)
        mx, my = max(mx, int(ev.x.max())), max(my, int(ev.y.max()))
        if edges is not None:
            offsets += np.searchsorted(ev.t, edges, side="left")
    return Index(offsets, t_first, t_last, mx, my, reader.sensor_size)


def load_or_scan(path: str, windowing: Windowing, cache_option: str) -> Index:
    """``path``'s index from the cache when fresh, else scanned (and cached); a cached index opens no file."""
    where = cache.folder(cache_option)
    name = "index-" + cache.key(path, window_us=windowing.window_us, per_window=windowing.per_window)
    if (arrays := cache.load_arrays(where, name)) is not None:
        try:
            return Index.from_arrays(arrays)
        except (KeyError, ValueError, TypeError) as exc:
            _log.warning(
                "streamcli: the events cache entry %s/%s.npz is not an index (%s); rebuilding it", where, name, exc
            )
    reader = open_reader(path, cache_option)
    try:
        index = scan(reader, windowing, path)
    finally:
        reader.close()
    cache.store_arrays(where, name, index.to_arrays())
    return index
