"""Where a batch of the ``arrays`` source goes, in process, against the hand loop (issue 48's workload).

    python benchmarks/investigations/arrays_costs.py            # 5 rounds, about a minute

The CPU time of this process (``time.process_time``, less disturbed by other load on a shared host than wall time)
per batch, medians over interleaved rounds of 200 batches after 24 untimed ones:

- streamcli: the whole ``next(loader)``, split into the windows opened (``Windows.get``: open, map and check a
  stream's file, once per stream), the rest of ``fill`` (each row's slice copy into the batch's slot, and the loop
  over the plan) and the rest of the engine (schedule, flags, summary, hand-out, tensors);
- the hand loop (``bench_small_steps.HandLoop`` over ``np.memmap``s mapped before the timing), and the same loop's
  bare slice copies, replayed into one ``(T, B, 12)`` array and into a ring of 20 of them (a loader's slots).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.bench_arrays import B, T, write_recordings
from benchmarks.bench_small_steps import Copy, HandLoop
from streamcli import StreamLoader, load_source
from streamcli.fills import planned, windows

WARMUP, BATCHES, ROUNDS, RING = 24, 200, 5, 20


def cpu_per_batch(it: Iterator[Any]) -> float:
    for _ in range(WARMUP):
        next(it)
    t0 = time.process_time()
    for _ in range(BATCHES):
        next(it)
    return (time.process_time() - t0) / BATCHES


class Split:
    """Time spent in ``windows.fill`` and in ``Windows.get`` while installed."""

    def __init__(self) -> None:
        self.fill = self.get = 0.0
        self._fill, self._get = windows.fill, windows.Windows.get

    def __enter__(self) -> Split:
        fill, get = self._fill, self._get

        def timed_fill(*a: Any) -> Any:
            t0 = time.process_time()
            try:
                return fill(*a)
            finally:
                self.fill += time.process_time() - t0

        def timed_get(w: windows.Windows, item: int, pos: int) -> Any:
            t0 = time.process_time()
            try:
                return get(w, item, pos)
            finally:
                self.get += time.process_time() - t0

        planned.fill = windows.fill = timed_fill  # type: ignore[attr-defined,assignment]
        windows.Windows.get = timed_get  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        planned.fill = windows.fill = self._fill  # type: ignore[attr-defined]
        windows.Windows.get = self._get  # type: ignore[method-assign]


def streamcli_split(source: Any) -> dict[str, float]:
    with StreamLoader(source, B, T, num_workers=0, seed=0, boundary="pack") as loader, Split() as s:
        it = iter(loader)
        for _ in range(WARMUP):
            next(it)
        s.fill = s.get = 0.0
        t0 = time.process_time()
        for _ in range(BATCHES):
            next(it)
        total = time.process_time() - t0
    return {
        "streamcli: whole batch": total / BATCHES,
        "  windows opened": s.get / BATCHES,
        "  rest of fill (slice copies, row loop)": (s.fill - s.get) / BATCHES,
        "  rest of the engine": (total - s.fill) / BATCHES,
    }


def hand_split(maps: list[np.ndarray], spans: np.ndarray) -> dict[str, float]:
    trace: list[Copy] = []
    loop = HandLoop(maps, spans, B, T, trace=trace)
    total = cpu_per_batch(iter(loop))
    copies = trace[-BATCHES * B :]  # about the timed batches' copies (a row change adds one)

    def replay(ring: int) -> float:
        outs = [np.zeros((T, B, 12), np.float32) for _ in range(ring)]
        t0 = time.process_time()
        k = -1
        for a, p, t, n, b in copies:
            k += t == 0 and b == 0
            outs[k % ring][t : t + n, b] = a[p : p + n]
        return (time.process_time() - t0) / BATCHES

    return {
        "hand loop: whole batch": total,
        "  its slice copies, one array": replay(1),
        "  into a ring of 20": replay(RING),
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="arrays_costs_") as tmp:
        write_recordings(Path(tmp))
        source = load_source("arrays", tmp, index="none")
        maps = [np.load(p, mmap_mode="r") for p in source.items()]
        spans = np.asarray([(i, 0, len(a)) for i, a in enumerate(maps)], np.int64)
        runs: list[Callable[[], dict[str, float]]] = [lambda: streamcli_split(source), lambda: hand_split(maps, spans)]
        got: dict[str, list[float]] = {}
        for r in range(ROUNDS):
            for run in runs[:: -1 if r % 2 else 1]:
                for k, v in run().items():
                    got.setdefault(k, []).append(v)
    print(f"CPU µs per batch, B={B}, T={T}, medians of {ROUNDS} rounds (range)")
    for name, times in got.items():
        median, low, high = statistics.median(times) * 1e6, min(times) * 1e6, max(times) * 1e6
        print(f"{name:45s} {median:7.0f}  ({low:.0f}-{high:.0f})")


if __name__ == "__main__":
    main()
