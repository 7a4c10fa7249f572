"""Benchmark: the loader's own cost per row and batch, with a source whose steps cost nothing.

    python benchmarks/bench_overhead.py              # T=8 and T=64, ~15 s; medians of 3

Every step is the same 1-byte array, so what remains is bookkeeping: the in-process loader (num_workers=0)
against a plain loop that writes the same steps into one ``(T, B, 1)`` array. The difference, divided by B,
is what the loader adds per row and batch (its runs, flags, cursors, counts and the hand-over of the batch).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streamcli import BaseSource, Field, StreamLoader

B, N = 16, 2000


class FreeSteps(BaseSource):
    """Long streams of one unchanging 1-byte step."""

    def items(self) -> Sequence[Any]:
        return list(range(64))

    def fields(self) -> Sequence[Field]:
        return [Field("x", (1,), "uint8")]

    def length(self, item: Any) -> int:
        return 10**7

    def open(self, item: Any, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        step = {"x": np.zeros(1, np.uint8)}
        for _ in range(start, 10**7):
            yield step


def loader(T: int) -> float:
    """Seconds per batch, in-process."""
    with StreamLoader(FreeSteps(), B, T, num_workers=0) as ld:
        it = iter(ld)
        for _ in range(50):
            next(it)
        t0 = time.perf_counter()
        for _ in range(N):
            next(it)
        return (time.perf_counter() - t0) / N


def plain(T: int) -> float:
    src = FreeSteps()
    its = [iter(src.open(i)) for i in range(B)]
    out = np.zeros((T, B, 1), np.uint8)
    t0 = time.perf_counter()
    for _ in range(N):
        for b in range(B):
            for t in range(T):
                out[t, b] = next(its[b])["x"]
    return (time.perf_counter() - t0) / N


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-steps", "-t", default="8,64", help="comma list of T (default 8,64)")
    args = ap.parse_args()
    print(f"B={B}, {N} timed batches, medians of 3\n")
    print("| T | loader µs/batch | plain loop µs/batch | loader speed vs plain loop | loader's own µs per row, batch |")
    print("|---:|---:|---:|---:|---:|")
    for T in (int(x) for x in args.time_steps.split(",")):
        ours = statistics.median(loader(T) for _ in range(3))
        base = statistics.median(plain(T) for _ in range(3))
        print(f"| {T} | {ours * 1e6:.0f} | {base * 1e6:.0f} | {base / ours:.2f}x | {(ours - base) / B * 1e6:.1f} |")


if __name__ == "__main__":
    main()
