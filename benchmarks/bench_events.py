"""Benchmark: the ``events`` source against a hand-written numpy loop over the same files.

    python benchmarks/bench_events.py                # about a minute; prints a Markdown table
    python benchmarks/bench_events.py --repeats 1 --seconds 0.5   # smoke run

The workload of issue 28: B = 8 recordings of ``--seconds`` each at 1 Mev/s on a 480x640 sensor (uniform
random pixels and polarities, sorted times), as ``.npy`` structured arrays in a temporary folder; 50 ms
windows; histograms ``(2, 480, 640)`` float32; T = 4 windows per batch; each recording in its own row.

- **hand loop** (the baseline): memory-map each file, ``np.searchsorted`` its window edges once, then per batch
  and row and window one ``np.bincount`` into a preallocated ``(T, B, 2, 480, 640)`` float32 batch: what a
  user writes without a loader.
- **streamcli**: ``StreamLoader(load_source("events", folder, window_us=50_000), 8, 4, shuffle=False)`` at
  ``--workers`` (0: in-process), one loader per worker count, timed over whole epochs after a first, untimed
  one (its start-up: workers, shared memory). The source's one-time index scan is timed on its own (cold
  cache) and then served from the cache.

The page cache is warmed by one untimed pass of each reader first. Figures are medians of ``--repeats``
passes, in windows per second (and Mev/s); the ratio is streamcli's throughput over the hand loop's.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from streamcli import StreamLoader, load_source

B, T, H, W = 8, 4, 480, 640
WINDOW_US = 50_000
DTYPE = np.dtype([("x", "<u2"), ("y", "<u2"), ("t", "<i8"), ("p", "u1")])


def make_recordings(folder: Path, seconds: float, rate: float) -> int:
    """B recordings of ``seconds`` at ``rate`` events/s; returns the events written in all."""
    rng = np.random.default_rng(0)
    n = int(seconds * rate)
    for b in range(B):
        ev = np.zeros(n, DTYPE)
        ev["t"] = np.sort(rng.integers(0, int(seconds * 1e6), n)) + 1000 * b
        ev["x"], ev["y"], ev["p"] = rng.integers(0, W, n), rng.integers(0, H, n), rng.integers(0, 2, n)
        ev["x"][0], ev["y"][0] = W - 1, H - 1  # the inferred sensor size is the full 480x640
        np.save(folder / f"rec{b}.npy", ev)
    return n * B


def hand_loop(files: list[Path]) -> int:
    """One epoch with plain numpy; returns the windows filled."""
    maps = [np.load(f, mmap_mode="r") for f in files]
    edges = []
    for m in maps:
        t = m["t"]
        k = (int(t[-1]) - int(t[0])) // WINDOW_US + 1
        edges.append(np.searchsorted(t, int(t[0]) + WINDOW_US * np.arange(k + 1)))
    batch = np.zeros((T, B, 2, H, W), np.float32)
    windows, longest = 0, max(len(e) - 1 for e in edges)
    for k0 in range(0, longest, T):
        batch[:] = 0
        for b, (m, e) in enumerate(zip(maps, edges, strict=True)):
            for i in range(min(T, len(e) - 1 - k0)):
                ev = m[e[k0 + i] : e[k0 + i + 1]]
                flat = (ev["p"].astype(np.int64) * H + ev["y"]) * W + ev["x"]
                batch[i, b] = np.bincount(flat, minlength=2 * H * W).reshape(2, H, W)
                windows += 1
    return windows


def streamcli_epoch(loader: StreamLoader) -> int:
    """One more epoch of a running loader; returns the windows filled."""
    windows = 0
    for batch in loader:
        windows += int(batch.flags()["valid"].sum())
    return windows


def timed(fn: Callable[[], int], repeats: int) -> tuple[float, int]:
    fn()  # warm the page cache (and, for streamcli, its index cache)
    times, n = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=2.0, help="length of each of the 8 recordings")
    ap.add_argument("--rate", type=float, default=1e6, help="events per second")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", default="0,2", help="comma-separated worker counts for streamcli")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        folder, cache = Path(tmp) / "recs", str(Path(tmp) / "cache")
        folder.mkdir()
        total = make_recordings(folder, args.seconds, args.rate)
        files = sorted(folder.glob("*.npy"))
        t0 = time.perf_counter()
        load_source("events", folder, window_us=WINDOW_US, cache_dir=cache).items()
        scan_s = time.perf_counter() - t0
        rows: list[tuple[str, float, int]] = []
        base_s, base_n = timed(lambda: hand_loop(files), args.repeats)
        rows.append(("hand loop (numpy, one process)", base_s, base_n))
        for w in (int(x) for x in args.workers.split(",")):
            src = load_source("events", folder, window_us=WINDOW_US, cache_dir=cache)
            with StreamLoader(src, B, T, num_workers=w, shuffle=False) as loader:
                s, n = timed(lambda loader=loader: streamcli_epoch(loader), args.repeats)  # type: ignore[misc]
            rows.append((f"streamcli, {w} workers" if w else "streamcli, in-process", s, n))
    print(
        f"{B} recordings x {args.seconds:g} s at {args.rate / 1e6:g} Mev/s ({total / 1e6:.0f} M events), "
        f"{WINDOW_US // 1000} ms windows, histograms (2, {H}, {W}) float32, B={B}, T={T}; "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, numpy {np.__version__}; "
        f"median of {args.repeats}; index scan (once, then cached): {scan_s:.2f} s\n"
    )
    print("| reader | windows/s | Mev/s | ratio to the hand loop |\n|---|---|---|---|")
    base_rate = base_n / base_s
    for label, s, n in rows:
        mev = total / s / 1e6 if n == base_n else float("nan")
        print(f"| {label} | {n / s:,.0f} | {mev:.1f} | {n / s / base_rate:.2f}x |")
    if any(n != base_n for _, _, n in rows):
        print(f"\nwindow counts differ: {[n for _, _, n in rows]}", file=sys.stderr)


if __name__ == "__main__":
    main()
