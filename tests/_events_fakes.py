"""Small event recordings for the events source's tests, and direct (per-event) references to check it by."""

from __future__ import annotations

from pathlib import Path

import numpy as np

H, W = 48, 64
DTYPE = np.dtype([("x", "<u2"), ("y", "<u2"), ("t", "<i8"), ("p", "u1")])


def recording(seed: int, n: int = 3000, t0: int = 12_345, duration: int = 400_000) -> np.ndarray:
    """``n`` sorted events with a silent gap in the middle (empty windows) and a ragged end (a partial window)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.integers(0, duration, n))
    t = np.where(t > duration // 3, t + 170_000, t) + t0  # the gap: several windows with no event
    ev = np.zeros(n, DTYPE)
    ev["t"], ev["x"], ev["y"], ev["p"] = t, rng.integers(0, W, n), rng.integers(0, H, n), rng.integers(0, 2, n)
    ev["x"][0], ev["y"][0] = W - 1, H - 1  # so the inferred sensor size is exactly (H, W)
    return ev


def write_folder(folder: Path, sizes: tuple[int, ...] = (3000, 1200, 4500)) -> list[np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, n in enumerate(sizes):
        ev = recording(i, n, t0=1000 * i + 7)
        np.save(folder / f"rec{i}.npy", ev)
        out.append(ev)
    return out


def window_ids(t: np.ndarray, window_us: int) -> np.ndarray:
    return (t.astype(np.int64) - int(t[0])) // window_us


def windows_by_mask(ev: np.ndarray, window_us: int) -> list[np.ndarray]:
    """The events of each window, found by comparing every timestamp with the window's two edges."""
    t = ev["t"].astype(np.int64)
    n = int((t[-1] - t[0]) // window_us) + 1
    edges = [(int(t[0]) + k * window_us, int(t[0]) + (k + 1) * window_us) for k in range(n)]
    return [ev[(t >= a) & (t < b)] for a, b in edges]


def histogram_ref(win: np.ndarray, h: int = H, w: int = W, d: int = 1) -> np.ndarray:
    out = np.zeros((2, h, w), np.float64)
    np.add.at(out, (win["p"].astype(int), win["y"] // d, win["x"] // d), 1)
    return out


def voxel_ref(win: np.ndarray, start: int, span: int, bins: int) -> np.ndarray:
    """One event at a time, in plain Python: the bilinear-in-time voxel grid."""
    out = np.zeros((bins, H, W), np.float64)
    for x, y, t, p in zip(win["x"], win["y"], win["t"], win["p"], strict=True):
        tn = (bins - 1) * (int(t) - start) / span
        lo = int(np.floor(tn))
        sign = 1.0 if p else -1.0
        out[lo, y, x] += sign * (1 - (tn - lo))
        if lo + 1 < bins:
            out[lo + 1, y, x] += sign * (tn - lo)
    return out


def time_surface_ref(win: np.ndarray, end: int, tau: float) -> np.ndarray:
    out = np.zeros((2, H, W), np.float64)
    latest: dict[tuple[int, int, int], int] = {}
    for x, y, t, p in zip(win["x"], win["y"], win["t"], win["p"], strict=True):
        latest[(int(p), int(y), int(x))] = int(t)  # events are sorted: the last one seen is the latest
    for (p, y, x), t in latest.items():
        out[p, y, x] = np.exp(-(end - t) / tau)
    return out
