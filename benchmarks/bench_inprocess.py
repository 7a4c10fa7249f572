"""Benchmark: the in-process loader (num_workers=0) against a plain loop writing the same source into one array.

    python benchmarks/bench_inprocess.py                  # ~6 s; 7 rounds, ratios: the median of the rounds'
    python benchmarks/bench_inprocess.py --rounds 3       # quicker
    python benchmarks/bench_inprocess.py --time-steps 64  # the same at T=64 (fewer, longer batches)

The source reads its frames 8 at a time and yields one step at a time (``workloads.ChunkedFrames``), or the
same frames as blocks of 8 (``workloads.BlockFrames``); B=16, T=8, 300 timed batches. The plain loop is what a
user writes without a loader: B iterators, one preallocated ``(T, B, 3, 64, 64)`` array, refilled from the
next item when a stream ends (no flags, no determinism rule); over the block source it copies a block (or the
part that fits) with one slice assignment. Each loader row is compared with the plain loop over the same
source. Issue 8 asks the loader to be no slower than it. One more row runs the plain loop into 6 rotating
shared-memory slots, as workers write (in-process the loader reuses the slot freed last, still in the caches):
what that destination alone costs.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workloads import BlockFrames, ChunkedFrames, SyntheticFrames, fill_by_hand
from streamcli import StreamLoader

B, T, N = 16, 8, 300


def plain_blocks(src: BlockFrames) -> float:
    """The same loop over the block source: each block is copied with one slice assignment."""
    items = list(src.items())
    its = [iter(src.open(i)) for i in items[:B]]
    queue = iter(items[B:])
    out = np.zeros((T, B, 3, 64, 64), np.uint8)
    left: list[np.ndarray | None] = [None] * B  # the unread rest of each row's current block
    t0 = time.perf_counter()
    for _ in range(N):
        for b in range(B):
            t = 0
            while t < T:
                blk = left[b]
                if blk is None or not len(blk):
                    step = next(its[b], None)
                    if step is None:
                        its[b] = iter(src.open(next(queue)))
                        step = next(its[b])
                    blk = step["frame"]
                m = min(T - t, len(blk))
                out[t : t + m, b] = blk[:m]
                left[b] = blk[m:]
                t += m
    return N / (time.perf_counter() - t0)


def plain(src: SyntheticFrames, slots: int = 0) -> float:
    """The plain loop; with ``slots``, writing batch i into shared-memory slot ``i % slots`` (as the loader
    does) instead of one array, to measure what the destination alone costs."""
    items = list(src.items())
    its = [iter(src.open(i)) for i in items[:B]]
    queue = iter(items[B:])
    shape = (T, B, 3, 64, 64)
    shm = shared_memory.SharedMemory(create=True, size=slots * int(np.prod(shape))) if slots else None
    outs = [np.zeros(shape, np.uint8)] if shm is None else [
        np.ndarray(shape, np.uint8, shm.buf, offset=i * int(np.prod(shape))) for i in range(slots)
    ]  # fmt: skip
    for o in outs:
        o.fill(0)  # touch every page before timing
    del o  # no view may outlive the segment's close
    try:
        return _plain_loop(src, its, queue, outs)
    finally:
        del outs
        if shm is not None:
            shm.close()
            shm.unlink()


def _plain_loop(src: SyntheticFrames, its: list[Any], queue: Iterator[Any], outs: list[np.ndarray]) -> float:
    t0 = time.perf_counter()
    for i in range(N):
        fill_by_hand(src, its, queue, outs[i % len(outs)])
    return N / (time.perf_counter() - t0)


def loader(src: SyntheticFrames) -> float:
    with StreamLoader(src, B, T) as ld:
        it = iter(ld)
        next(it)
        t0 = time.perf_counter()
        for _ in range(N):
            next(it)
        return N / (time.perf_counter() - t0)


def main() -> None:
    global T, N
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-steps", "-t", type=int, default=T, help="T of every row (default 8)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds, each running every row once (default 7)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: must be at least 1")
    T = args.time_steps
    N = 300 if T <= 8 else max(10, 2400 // T)  # the epoch has about 70k steps: stay inside it
    steps, blocks = ChunkedFrames(64, 200, 2000), BlockFrames(64, 200, 2000)
    rows: dict[str, Callable[[], float]] = {
        "plain loop (steps)": functools.partial(plain, steps),
        "StreamLoader, 0 workers (steps)": functools.partial(loader, steps),
        "plain loop (steps) into 6 rotating shared-memory slots": functools.partial(plain, steps, slots=6),
        "plain loop (blocks of 8)": functools.partial(plain_blocks, blocks),
        "StreamLoader, 0 workers (blocks of 8)": functools.partial(loader, blocks),
    }
    # Rows interleaved round by round, the order reversed every other round: this host's speed swings by a third
    # or more within seconds, so each ratio is the median of the rounds' ratios, each round's rows side by side.
    got: dict[str, list[float]] = {name: [] for name in rows}
    for r in range(args.rounds):
        for name in list(rows)[:: -1 if r % 2 else 1]:
            got[name].append(rows[name]())
    print(f"B={B}, T={T}, {N} timed batches, {args.rounds} rounds\n")
    print("| run | batches/s (median) | steps/s | vs the plain loop over the same source: rounds' median (range) |")
    print("|---|---:|---:|---|")
    for name, rates in got.items():
        base = got["plain loop (blocks of 8)" if "blocks" in name else "plain loop (steps)"]
        ratios = sorted(x / y for x, y in zip(rates, base, strict=True))
        rate = statistics.median(rates)
        spread = f" ({ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else ""
        print(f"| {name} | {rate:.0f} | {rate * B * T:,.0f} | {statistics.median(ratios):.2f}x{spread} |")


if __name__ == "__main__":
    main()
