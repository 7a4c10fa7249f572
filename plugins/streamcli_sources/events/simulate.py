"""Events from video, for anyone without an event camera (the idea of ESIM and v2e, in vectorised numpy).

Each pixel keeps a reference log intensity. Between two frames, a pixel whose log intensity ``L`` moved
from its reference by ``n`` contrast thresholds ``C`` fires ``n`` events (polarity 1 for brighter, 0 for
darker); the i-th crosses the level ``ref ± i·C``, and its timestamp is where ``L`` crosses that level
when interpolated linearly between the two frames (in whole µs, rounded down). The reference then moves by
``n·C``. One frame pair is a handful of array operations over all pixels and events; only the loop over
frames is Python. Events are ordered by time, then by pixel (row-major), so a simulation is deterministic.

Not modelled: sensor noise, the refractory period and bandwidth limits (v2e's leak, shot noise and
low-pass filter); the events are the ideal ones.

``from_source`` runs the simulator over any source whose steps carry a ``frame`` (``video``, ``camera``), timed
by its ``time_ms`` field where there is one, else at ``fps``. ``export_recordings`` writes one file per stream
in a real format (EVT 3.0, AEDAT4, ... through ``decoded.write_file``, or ``.npy``), which the ``events``
source reads back as the same events.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from streamcli.source import StreamSource, call_item_name, iter_steps
from streamcli_sources.events.decoded import write_file

DTYPE = np.dtype([("x", "<u2"), ("y", "<u2"), ("t", "<i8"), ("p", "u1")])
"""A simulated recording: the ``.npy`` layout the ``events`` source reads."""

LUMA = np.array([0.299, 0.587, 0.114])  # RGB -> gray (ITU-R BT.601)


def log_intensity(frame: npt.ArrayLike, eps: float = 1e-3) -> npt.NDArray[np.float64]:
    """``log(eps + I)`` of a gray ``(H, W)`` or a CHW/1HW frame, with uint8 scaled to [0, 1]."""
    a = np.asarray(frame)
    img = a.astype(np.float64) / 255.0 if a.dtype == np.uint8 else a.astype(np.float64)
    if img.ndim == 3:
        img = img[0] if img.shape[0] == 1 else np.tensordot(LUMA, img[:3], axes=1)
    return np.log(eps + img)


def _interval(
    l0: np.ndarray, l1: np.ndarray, ref: np.ndarray, t0: int, t1: int, c: float
) -> tuple[np.ndarray, np.ndarray]:
    """Events of one frame pair (flat pixel index, t, polarity, in time order) and the updated reference."""
    d = l1 - ref
    n = np.floor(np.abs(d) / c).astype(np.int64)
    pix = np.flatnonzero(n)
    counts = n.ravel()[pix]
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, DTYPE), ref
    each = np.repeat(pix, counts)
    i = np.arange(1, total + 1) - np.repeat(np.cumsum(counts) - counts, counts)  # 1..n within a pixel
    sign = np.sign(d.ravel()[each])
    level = ref.ravel()[each] + sign * i * c
    a, b = l0.ravel()[each], l1.ravel()[each]
    slope = b - a
    frac = np.clip(np.divide(level - a, slope, out=np.ones_like(level), where=slope != 0), 0.0, 1.0)
    t = t0 + np.floor(frac * (t1 - t0)).astype(np.int64)
    new_ref = ref.copy()
    new_ref.ravel()[pix] += np.sign(d.ravel()[pix]) * counts * c
    order = np.lexsort((each, t))
    w = l0.shape[1]
    out = np.zeros(total, DTYPE)
    out["x"], out["y"], out["t"], out["p"] = each[order] % w, each[order] // w, t[order], sign[order] > 0
    return out, new_ref


def simulate(frames: Iterable[tuple[npt.ArrayLike, int]], threshold: float = 0.2, eps: float = 1e-3) -> np.ndarray:
    """Events from ``(frame, t_us)`` pairs in time order; the first frame sets every pixel's reference."""
    if not threshold > 0:
        raise ValueError(f"threshold={threshold} must be a positive contrast (log intensity), e.g. 0.2")
    parts: list[np.ndarray] = []
    prev: tuple[np.ndarray, int] | None = None
    ref: np.ndarray | None = None
    for frame, t in frames:
        lt, t = log_intensity(frame, eps), int(t)
        if prev is None or ref is None:
            ref = lt.copy()
        else:
            if t < prev[1]:
                raise ValueError(f"frame times go backwards ({prev[1]} then {t} µs)")
            ev, ref = _interval(prev[0], lt, ref, prev[1], t, threshold)
            parts.append(ev)
        prev = (lt, t)
    return np.concatenate(parts) if parts else np.zeros(0, DTYPE)


def from_source(
    source: StreamSource, item: Any, *, threshold: float = 0.2, fps: float = 30.0, eps: float = 1e-3
) -> np.ndarray:
    """Events of one stream of a frame source (``video``, ``camera``): its ``frame`` field, timed by ``time_ms``
    where the source has it, else at ``fps``."""
    names = {f.name for f in source.fields()}
    if "frame" not in names:
        raise ValueError(f"the source's steps have no 'frame' field (fields: {', '.join(sorted(names))})")
    timed = "time_ms" in names

    def frames() -> Iterable[tuple[npt.ArrayLike, int]]:
        for k, step in enumerate(iter_steps(source, item)):
            ms = float(np.asarray(step["time_ms"])) if timed else k * 1000.0 / fps
            yield step["frame"], round(ms * 1000)

    return simulate(frames(), threshold, eps)


def export_recordings(
    source: StreamSource,
    folder: str | Path,
    *,
    suffix: str = ".raw",
    threshold: float = 0.2,
    fps: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Simulate every stream of a frame source and write one event file per stream into ``folder``.

    ``suffix`` picks the format: ``.npy`` (numpy, no extra needed) or one that ``decoded.write_file`` writes
    (``.raw`` EVT 3.0, ``.aedat4``, ``.dat``, ``.es``). Files are named ``NNNNN-<stream name>`` in stream order;
    the ``events`` source reads the folder back as the same streams. ``progress(done, total)`` counts streams.
    """
    frame = next((f for f in source.fields() if f.name == "frame"), None)
    if frame is None:
        raise ValueError("the source's steps have no 'frame' field; simulate over video or camera")
    height, width = frame.shape[-2:]
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    items = list(source.items())
    written: list[Path] = []
    for i, item in enumerate(items):
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(call_item_name(source, item)).stem)
        path = out / f"{i:05d}-{name}{suffix}"
        events = from_source(source, item, threshold=threshold, fps=fps)
        if suffix == ".npy":
            np.save(path, events)
        else:
            write_file(str(path), events, (height, width))
        written.append(path)
        if progress is not None:
            progress(i + 1, len(items))
    return written
