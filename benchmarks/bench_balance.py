"""Benchmark: 2 workers against 1 when a few streams cost far more than the rest.

    python benchmarks/bench_balance.py             # about a minute; prints a Markdown table
    python benchmarks/bench_balance.py --sleep     # steps that sleep: the scheduling alone, free of CPU contention
    python benchmarks/bench_balance.py --repeats 1
    python benchmarks/bench_balance.py --balance off  # a block of rows per worker (on: balanced from the start)

24 streams of 100-400 steps; the 3 heavy ones cost 1 ms per step, the others 50 µs (``SkewedFrames``: CPU
burnt, or with ``--sleep`` time slept, so that two workers never compete for the 2 cores). B=6, T=8, boundary
"pack". Where the heavy streams land depends on the epoch's shuffle, so each seed is an epoch of its own, run
with 1 and with 2 workers, interleaved. Per seed: the 2-worker / 1-worker ratio, the rows moved between
workers mid-stream (``stats.rows_moved``), and three figures computed from the epoch's layout and the step
costs: what 2 workers would gain in lockstep (every batch taking its costliest row, or half its rows' cost),
what an ideal scheduler could gain writing at most the loader's ``window`` of batches ahead (in brackets;
``workloads.windowed_figure``), and the row-chain bound (the epoch takes at least its costliest row's whole
sequence of streams, and at least half of all the work).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable here and in spawn workers
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workloads import SkewedFrames, scaling_figures, windowed_figure
from streamcli import StreamLoader

B, T = 6, 8
BALANCE: bool | None = None  # ``--balance``: the loader's ``balance=`` (None: measured)


def epoch(src: SkewedFrames, workers: int, seed: int) -> tuple[float, int, int, int]:
    """(seconds, valid steps, rows moved, window at the end) of one epoch; the loader is built and warmed before
    the clock."""
    with StreamLoader(src, B, T, num_workers=workers, seed=seed, boundary="pack", balance=BALANCE) as loader:
        it = iter(loader)
        steps = int(next(it).valid.sum())
        t = time.perf_counter()
        steps += sum(int(b.valid.sum()) for b in it)
        moved = getattr(loader.stats, "rows_moved", 0)  # 0 before 2026-11-23
        window = getattr(loader, "window", getattr(loader, "prefetch", 4))  # 4 before 2026-11-24, then prefetch
        return time.perf_counter() - t, steps, moved, window


def figures(src: SkewedFrames, seed: int, window: int) -> tuple[float, float, float]:
    """(lockstep figure, ideal scheduler with ``window`` batches ahead, row-chain bound) for 2 workers on this
    seed's epoch, from its layout and step costs."""
    cost = np.array([src.step_cost(i) for i in range(src.n_items)])
    per_batch = []
    with StreamLoader(src, B, T, seed=seed, boundary="pack") as loader:
        for batch in loader:
            item = np.where(batch.valid.numpy(), batch.stream.numpy(), -1)
            per_batch.append(np.where(item >= 0, cost[np.maximum(item, 0)], 0.0).sum(axis=0))
    lockstep, chain = scaling_figures(per_batch)
    return lockstep, windowed_figure(per_batch, window), chain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="passes per seed and worker count")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sleep", action="store_true", help="steps sleep instead of burning CPU")
    ap.add_argument("--balance", choices=("measured", "on", "off"), default="measured",
                    help="balance= of the loaders (measured: the default, None)")  # fmt: skip
    args = ap.parse_args()
    global BALANCE
    BALANCE = {"measured": None, "on": True, "off": False}[args.balance]
    src = SkewedFrames(24, 100, 400, frame_cost_s=50e-6, sleep=args.sleep)
    print(
        "| seed | 1 worker, steps/s | 2 workers, steps/s | ratio | lockstep | ideal, window | row-chain bound "
        "| rows moved |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for seed in range(args.seeds):
        one, two, moved = [], [], []
        for _ in range(args.repeats):
            s1, n1, _, _ = epoch(src, 1, seed)
            s2, n2, m, window = epoch(src, 2, seed)
            one.append(n1 / s1)
            two.append(n2 / s2)
            moved.append(m)
        r1, r2 = statistics.median(one), statistics.median(two)
        ratios.append(r2 / r1)
        lockstep, windowed, chain = figures(src, seed, window)
        print(f"| {seed} | {r1:.0f} | {r2:.0f} | {r2 / r1:.2f}x | {lockstep:.2f}x | {windowed:.2f}x ({window}) | "
              f"{chain:.2f}x | {statistics.median(moved):.0f} |", flush=True)  # fmt: skip
    print(f"\nmedian ratio over seeds {statistics.median(ratios):.2f}x ({'sleeping' if args.sleep else 'CPU'} steps)")


if __name__ == "__main__":
    main()
