"""Benchmark: 2 workers against 1 when a few streams cost far more than the rest.

    python benchmarks/bench_balance.py             # about a minute; prints a Markdown table
    python benchmarks/bench_balance.py --repeats 1

24 streams of 100-400 steps; the 3 heavy ones burn 1 ms of CPU per step, the others 50 µs (``SkewedFrames``).
B=6, T=8, boundary "pack". Where the heavy streams land depends on the epoch's shuffle, so each pass is one
epoch of its own seed, and the same seeds run with 1 and with 2 workers, interleaved. The table gives each
seed's 2-worker / 1-worker ratio and the rows the 2-worker run moved between workers mid-stream
(``stats.rows_moved``). The bound: an epoch takes at least its costliest stream, and at least half the work.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.workloads import SkewedFrames
from streamcli import StreamLoader

B, T = 6, 8


def epoch(src: SkewedFrames, workers: int, seed: int) -> tuple[float, int, int]:
    """(seconds, valid steps, rows moved) of one epoch; the loader is built and warmed before the clock."""
    with StreamLoader(src, B, T, num_workers=workers, seed=seed, boundary="pack") as loader:
        it = iter(loader)
        steps = int(next(it).valid.sum())
        t = time.perf_counter()
        steps += sum(int(b.valid.sum()) for b in it)
        return time.perf_counter() - t, steps, getattr(loader.stats, "rows_moved", 0)  # 0 before 2026-11-23


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="passes per seed and worker count")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    src = SkewedFrames(24, 100, 400, frame_cost_s=50e-6)
    costs = [src.length(i) * src.frame_cost_s * (src.heavy_factor if i < src.heavy else 1) for i in range(24)]
    bound = sum(costs) / max(sum(costs) / 2, max(costs))
    print("| seed | 1 worker, steps/s | 2 workers, steps/s | ratio | rows moved |\n|---:|---:|---:|---:|---:|")
    ratios = []
    for seed in range(args.seeds):
        one, two, moved = [], [], []
        for _ in range(args.repeats):
            s1, n1, _ = epoch(src, 1, seed)
            s2, n2, m = epoch(src, 2, seed)
            one.append(n1 / s1)
            two.append(n2 / s2)
            moved.append(m)
        r1, r2 = statistics.median(one), statistics.median(two)
        ratios.append(r2 / r1)
        print(f"| {seed} | {r1:.0f} | {r2:.0f} | {r2 / r1:.2f}x | {statistics.median(moved):.0f} |", flush=True)
    print(f"\nmedian ratio over seeds {statistics.median(ratios):.2f}x; bound (costliest stream) {bound:.2f}x")


if __name__ == "__main__":
    main()
