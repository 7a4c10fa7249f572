"""Tensors from windows of events, computed for a whole block of windows at once with no per-event Python.

Each function takes the events of ``n`` consecutive windows (``ev``), where each window begins in ``ev``
(``bounds``: n + 1 offsets into ``ev``), when each window starts (``start``, µs) and how long it lasts
(``span``, µs), and returns an array of shape ``(n, *step_shape)``. Pixel and window are folded into one flat
index, so one ``np.bincount`` (or one ``np.maximum.at``) does a whole block.

- ``histogram`` ``(2, H, W)``: channel c counts the events of polarity c.
- ``voxel`` ``(bins, H, W)``: each event adds its sign (+1 for polarity 1, -1 for 0) to the two time bins
  nearest to ``tn = (bins - 1) * (t - start) / span``, weighted ``1 - frac(tn)`` and ``frac(tn)`` (bilinear
  in time, as in E2VID and RVT's voxel grids).
- ``time_surface`` ``(2, H, W)``: per polarity and pixel, ``exp(-(start + span - t_last) / tau)`` for the
  pixel's latest event in the window, 0 where it has none. Only the window's own events count, so every
  window stands alone (exact resume needs no history).
- ``raw`` ``(capacity, 4)`` int64 rows ``x, y, t, p``, zero-padded, plus ``count``, the rows that are real.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from streamcli.errors import SourceError
from streamcli_sources.events.formats import Events

if TYPE_CHECKING:
    from streamcli_sources.events.windows import Windowing

REPRESENTATIONS = ("histogram", "voxel", "time_surface", "raw")


@dataclass(frozen=True)
class Spec:
    """What one window becomes: the representation, the output grid and its options."""

    name: str
    height: int
    width: int
    downsample: int = 1
    bins: int = 5
    tau_us: float = 0.0  # 0: the window's span
    capacity: int = 0
    overflow: str = "error"
    dtype: str = "float32"

    @property
    def step_shape(self) -> tuple[int, ...]:
        if self.name == "raw":
            return (self.capacity, 4)
        return (self.bins if self.name == "voxel" else 2, self.height, self.width)

    @property
    def step_dtype(self) -> str:
        return "int64" if self.name == "raw" else self.dtype


def _pixels(ev: Events, spec: Spec) -> npt.NDArray[np.int64]:
    d = spec.downsample
    return (ev.y // d) * spec.width + ev.x // d if d > 1 else ev.y * spec.width + ev.x


def _window_of(bounds: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return np.repeat(np.arange(len(bounds) - 1, dtype=np.int64), np.diff(bounds))


def histogram(ev: Events, bounds: npt.NDArray[np.int64], spec: Spec) -> np.ndarray:
    n, hw = len(bounds) - 1, spec.height * spec.width
    flat = (_window_of(bounds) * 2 + ev.p) * hw + _pixels(ev, spec)
    counts = np.bincount(flat, minlength=n * 2 * hw)
    return counts.astype(spec.dtype, copy=False).reshape(n, 2, spec.height, spec.width)


def voxel(
    ev: Events, bounds: npt.NDArray[np.int64], start: npt.NDArray[np.int64], span: npt.NDArray[np.int64], spec: Spec
) -> np.ndarray:
    n, hw, bins = len(bounds) - 1, spec.height * spec.width, spec.bins
    w = _window_of(bounds)
    width = span[w].astype(np.float64)
    tn = (ev.t - start[w]).astype(np.float64) * (bins - 1) / np.where(width > 0, width, 1.0)
    lo = np.floor(tn).astype(np.int64)
    frac = tn - lo
    sign = (2 * ev.p - 1).astype(np.float64)
    base = w * bins * hw + _pixels(ev, spec)
    up = lo + 1 < bins
    flat = np.concatenate([base + lo * hw, base[up] + (lo[up] + 1) * hw])
    weight = np.concatenate([sign * (1.0 - frac), (sign * frac)[up]])
    grid = np.bincount(flat, weights=weight, minlength=n * bins * hw)
    return grid.astype(spec.dtype, copy=False).reshape(n, bins, spec.height, spec.width)


def time_surface(
    ev: Events, bounds: npt.NDArray[np.int64], start: npt.NDArray[np.int64], span: npt.NDArray[np.int64], spec: Spec
) -> np.ndarray:
    n, hw = len(bounds) - 1, spec.height * spec.width
    w = _window_of(bounds)
    flat = (w * 2 + ev.p) * hw + _pixels(ev, spec)
    # Latest time per cell, as 1 + (t - start) so that 0 means "no event"; maximum.at is order-free.
    latest = np.zeros(n * 2 * hw, np.int64)
    np.maximum.at(latest, flat, ev.t - start[w] + 1)
    last = latest.reshape(n, 2 * hw)
    tau = np.full(n, float(spec.tau_us)) if spec.tau_us > 0 else np.maximum(span, 1).astype(np.float64)
    age = (span[:, None] - (last - 1)).astype(np.float64)
    out = np.where(last > 0, np.exp(-age / tau[:, None]), 0.0)
    return out.astype(spec.dtype, copy=False).reshape(n, 2, spec.height, spec.width)


def raw(ev: Events, bounds: npt.NDArray[np.int64], spec: Spec, first_window: int = 0) -> tuple[np.ndarray, np.ndarray]:
    n, cap = len(bounds) - 1, spec.capacity
    counts = np.diff(bounds)
    if spec.overflow == "error" and (over := np.flatnonzero(counts > cap)).size:
        k = int(over[0])
        raise SourceError(
            f"events: window {first_window + k} holds {int(counts[k])} events, more than capacity={cap}; "
            "raise capacity, or pass overflow='truncate' to keep each window's first events"
        )
    w = _window_of(bounds)
    j = np.arange(len(ev), dtype=np.int64) - bounds[w]
    keep = j < cap
    out = np.zeros((n, cap, 4), np.int64)
    d = spec.downsample
    out[w[keep], j[keep]] = np.stack([ev.x[keep] // d, ev.y[keep] // d, ev.t[keep], ev.p[keep]], axis=1)
    return out, np.minimum(counts, cap).astype(np.int32)


def block(
    ev: Events, bounds: npt.NDArray[np.int64], t_first: int, k0: int, spec: Spec, windowing: Windowing
) -> dict[str, np.ndarray]:
    """The steps of the ``len(bounds) - 1`` windows from window ``k0`` in ``spec``'s representation, with
    ``time_us`` (and ``count``); ``t_first``, the recording's first event's time, is where time windows begin."""
    n = len(bounds) - 1
    if windowing.per_window:  # every count window holds at least one event
        start = ev.t[bounds[:-1]]
        span = ev.t[bounds[1:] - 1] - start
    else:
        start = t_first + windowing.window_us * np.arange(k0, k0 + n, dtype=np.int64)
        span = np.full(n, windowing.window_us, np.int64)
    if spec.name == "histogram":
        data = histogram(ev, bounds, spec)
    elif spec.name == "voxel":
        data = voxel(ev, bounds, start, span, spec)
    elif spec.name == "time_surface":
        data = time_surface(ev, bounds, start, span, spec)
    else:
        rows, count = raw(ev, bounds, spec, k0)
        return {"events": rows, "time_us": start, "count": count}
    return {"events": data, "time_us": start}
