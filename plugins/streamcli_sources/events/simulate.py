"""Events from video, for anyone without an event camera (the idea of ESIM and v2e, in vectorised numpy).

Each pixel keeps a reference log intensity. Between two frames, a pixel whose log intensity ``L`` moved
from its reference by ``n`` contrast thresholds ``C`` fires ``n`` events (polarity 1 for brighter, 0 for
darker); the i-th crosses the level ``ref ± i·C``, and its timestamp is where ``L`` crosses that level
when interpolated linearly between the two frames (in whole µs, rounded down). The reference then moves by
``n·C``. One frame pair is a handful of array operations over all pixels and events; only the loop over
frames is Python. Events are ordered by time, then by pixel (row-major), so a simulation is deterministic.

Options (``Simulator``): a refractory period per pixel, and shot noise (uniform, seeded per frame pair).
Not modelled: leak events, the photoreceptor's low-pass filter and bandwidth limits (v2e has them).

``from_source`` runs the simulator over any source whose steps carry a ``frame`` (``video``, ``camera``), timed
by its ``time_ms`` field where there is one, else at ``fps``. ``export_recordings`` writes one file per stream
in a real format (EVT 3.0, AEDAT4, ... through ``decoded.write_file``, or ``.npy``), which the ``events``
source reads back as the same events.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from streamcli.source import StreamSource, call_item_name, iter_steps
from streamcli_sources.events.decoded import write_file

DTYPE = np.dtype([("x", "<u2"), ("y", "<u2"), ("t", "<i8"), ("p", "u1")])
"""A simulated recording: the ``.npy`` layout the ``events`` source reads."""

LUMA = np.array([0.299, 0.587, 0.114])  # RGB -> gray (ITU-R BT.601)
MAX_NOISE_HZ = 1e6
"""The most shot noise a pixel can have: timestamps are whole µs, so a pixel fires at most once a µs."""


def log_intensity(frame: npt.ArrayLike, eps: float = 1e-3) -> npt.NDArray[np.float64]:
    """``log(eps + I)`` of a gray ``(H, W)`` or a CHW/1HW frame, with uint8 scaled to [0, 1]."""
    a = np.asarray(frame)
    img = a.astype(np.float64) / 255.0 if a.dtype == np.uint8 else a.astype(np.float64)
    if img.ndim == 3:
        img = img[0] if img.shape[0] == 1 else np.tensordot(LUMA, img[:3], axes=1)
    return np.log(eps + img)


@dataclass(frozen=True)
class Simulator:
    """The simulated sensor.

    Args:
        threshold: the contrast threshold ``C``, in log intensity.
        eps: added to intensities in [0, 1] before the log (keeps black pixels finite).
        refractory_us: after an event, a pixel's further events within this many µs are dropped (its
            reference still moves, so a long ramp resumes firing where it stands).
        noise_hz: shot-noise events per pixel per second, at uniform times and pixels, either polarity.
        seed: the noise's seed; frame pair ``k`` draws from ``default_rng([seed, k])``, so noise is reproducible.
    """

    threshold: float = 0.2
    eps: float = 1e-3
    refractory_us: int = 0
    noise_hz: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        # each test is written so that nan, which compares false with everything, fails it
        if not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise ValueError(
                f"threshold={self.threshold} must be a positive contrast (log intensity): a finite number > 0, e.g. 0.2"
            )
        if not (0 <= self.eps < math.inf):
            raise ValueError(f"eps={self.eps} must be a finite number >= 0, e.g. 1e-3")
        if self.refractory_us < 0:
            raise ValueError(f"refractory_us={self.refractory_us} must be a whole number of µs >= 0, e.g. 500")
        if not 0 <= self.noise_hz <= MAX_NOISE_HZ:
            raise ValueError(
                f"noise_hz={self.noise_hz} must be from 0 to {MAX_NOISE_HZ:,.0f} events per pixel per second, e.g. 0.5"
            )
        if self.seed < 0:
            raise ValueError(f"seed={self.seed} must be a whole number >= 0, e.g. 0")

    def run(self, frames: Iterable[tuple[npt.ArrayLike, int]]) -> np.ndarray:
        """Events from ``(frame, t_us)`` pairs in time order; the first frame sets every pixel's reference."""
        parts: list[np.ndarray] = []
        prev: tuple[np.ndarray, int] | None = None
        ref = last = np.zeros(0)
        for k, (frame, t_us) in enumerate(frames):
            lt, t = log_intensity(frame, self.eps), int(t_us)
            if prev is None:
                ref, last = lt.copy(), np.full(lt.size, np.iinfo(np.int64).min // 2, np.int64)
            else:
                if t < prev[1]:
                    raise ValueError(f"frame times go backwards ({prev[1]} then {t} µs)")
                parts.append(self._interval(k, prev[0], lt, ref, last, prev[1], t))
            prev = (lt, t)
        return np.concatenate(parts) if parts else np.zeros(0, DTYPE)

    def _interval(
        self, k: int, l0: np.ndarray, l1: np.ndarray, ref: np.ndarray, last: np.ndarray, t0: int, t1: int
    ) -> np.ndarray:
        """Events between two frames, in time order; updates ``ref`` and ``last`` (per-pixel) in place."""
        c, flat_ref = self.threshold, ref.reshape(-1)
        d = (l1 - ref).reshape(-1)
        n = np.floor(np.abs(d) / c).astype(np.int64)
        pix = np.flatnonzero(n)
        counts = n[pix]
        each = np.repeat(pix, counts)
        i = np.arange(1, len(each) + 1) - np.repeat(np.cumsum(counts) - counts, counts)  # 1..n within a pixel
        sign = np.sign(d[each])
        level = flat_ref[each] + sign * i * c
        a, b = l0.reshape(-1)[each], l1.reshape(-1)[each]
        frac = np.clip(np.divide(level - a, b - a, out=np.ones_like(level), where=b != a), 0.0, 1.0)
        t = t0 + np.floor(frac * (t1 - t0)).astype(np.int64)
        flat_ref[pix] += np.sign(d[pix]) * counts * c
        p = sign > 0
        if self.noise_hz > 0 and t1 > t0:
            rng = np.random.default_rng([self.seed, k])
            m = int(rng.poisson(self.noise_hz * (t1 - t0) / 1e6 * d.size))
            each = np.concatenate([each, rng.integers(0, d.size, m)])
            t = np.concatenate([t, t0 + 1 + rng.integers(0, t1 - t0, m)])
            p = np.concatenate([p, rng.integers(0, 2, m) > 0])
        if self.refractory_us > 0 and len(t):
            keep = _refractory(each, t, last, self.refractory_us)
            each, t, p = each[keep], t[keep], p[keep]
        order = np.lexsort((each, t))
        w = l0.shape[-1]
        out = np.zeros(len(t), DTYPE)
        out["x"], out["y"], out["t"], out["p"] = each[order] % w, each[order] // w, t[order], p[order]
        return out


def _refractory(pixel: np.ndarray, t: np.ndarray, last: np.ndarray, gap: int) -> np.ndarray:
    """Which events survive a refractory period, updating each pixel's last kept time in ``last``.

    Exact and sequential per pixel, vectorised across pixels: pass r handles every pixel's r-th event (in time
    order), so the loop runs as many times as the busiest pixel has events in this interval.
    """
    order = np.lexsort((t, pixel))
    px, tt = pixel[order], t[order]
    starts = np.flatnonzero(np.r_[True, px[1:] != px[:-1]])
    rank = np.arange(len(px)) - np.repeat(starts, np.diff(np.r_[starts, len(px)]))
    keep = np.zeros(len(px), bool)
    for r in range(int(rank.max()) + 1):
        at = np.flatnonzero(rank == r)
        ok = tt[at] - last[px[at]] >= gap
        keep[at[ok]] = True
        last[px[at[ok]]] = tt[at[ok]]
    out = np.zeros(len(px), bool)
    out[order] = keep
    return out


def simulate(frames: Iterable[tuple[npt.ArrayLike, int]], threshold: float = 0.2, eps: float = 1e-3) -> np.ndarray:
    """Ideal events from ``(frame, t_us)`` pairs: ``Simulator(threshold, eps).run(frames)``."""
    return Simulator(threshold, eps).run(frames)


def from_source(
    source: StreamSource, item: Any, simulator: Simulator | None = None, *, fps: float = 30.0
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

    return (simulator or Simulator()).run(frames())


def export_recordings(
    source: StreamSource,
    folder: str | Path,
    *,
    suffix: str = ".raw",
    simulator: Simulator | None = None,
    fps: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Simulate every stream of a frame source and write one event file per stream into ``folder``.

    ``suffix`` picks the format: ``.npy`` (numpy, no extra needed) or one that ``decoded.write_file`` writes
    (``.raw`` EVT 3.0, ``.aedat4``, ``.dat``, ``.es``). Files are named ``NNNNN-<stream name>`` in stream order;
    the ``events`` source reads the folder back as the same streams. ``progress(done, total)`` counts streams.
    """
    height, width = frame_size(source)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    items = list(source.items())
    written: list[Path] = []
    for i, item in enumerate(items):
        path = recording_path(out, i, source, item, suffix)
        write_recording(path, from_source(source, item, simulator, fps=fps), (height, width))
        written.append(path)
        if progress is not None:
            progress(i + 1, len(items))
    return written


def frame_size(source: StreamSource) -> tuple[int, int]:
    """``(height, width)`` of a frame source's ``frame`` field; ``ValueError`` if it has none."""
    frame = next((f for f in source.fields() if f.name == "frame"), None)
    if frame is None:
        names = ", ".join(sorted(f.name for f in source.fields()))
        raise ValueError(f"the source's steps have no 'frame' field (fields: {names}); simulate over video or camera")
    height, width = frame.shape[-2:]
    return int(height), int(width)


def recording_path(folder: Path, i: int, source: StreamSource, item: Any, suffix: str) -> Path:
    """Where stream ``i`` is written: ``NNNNN-<stream name><suffix>``, so files sort in stream order."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(call_item_name(source, item)).stem)
    return folder / f"{i:05d}-{name}{suffix}"


PARTIAL = ".partial"
"""Suffix of a file being written (no reader takes it for a recording); renamed to its real name when complete."""


def write_recording(path: Path, events: np.ndarray, sensor_size: tuple[int, int]) -> None:
    """Write one recording in the format of ``path``'s suffix, under a temporary name first, then rename it.

    A killed run leaves at most a ``*.partial`` file (or faery's ``*.partial.write``), which the ``events`` source
    does not read; a failed one (a full disk) leaves neither.
    """
    suffix = path.suffix.lower()
    tmp = path.with_name(path.name + PARTIAL)
    try:
        if suffix == ".npy":
            with open(tmp, "wb") as f:
                np.save(f, events)
        else:
            write_file(str(tmp), events, sensor_size, suffix=suffix)
        tmp.replace(path)
    finally:
        for name in temporary_names(path.name):
            (path.parent / name).unlink(missing_ok=True)


def temporary_names(name: str) -> tuple[str, str]:
    """The names a recording is written under before it is renamed to ``name``: ours, and faery's own
    (``stream.to_file`` writes to ``<path>.write`` and renames it)."""
    return name + PARTIAL, name + PARTIAL + ".write"
