"""Two workers against one on bench_balance's skewed workload, lengths known and hidden, balanced or in fixed blocks.

    python benchmarks/investigations/balance_unknown.py               # sleeping steps: the scheduling alone
    python benchmarks/investigations/balance_unknown.py --cpu         # steps that burn CPU
    python benchmarks/investigations/balance_unknown.py --cheap       # frames that cost nothing: batches/s

24 streams of 100-400 steps, the 3 heavy ones 20 times costlier (``workloads.SkewedFrames``), B=6, T=8, "pack".
Per seed, one epoch on 1 worker and one on 2 (each loader warmed by its first batch), interleaved; the table gives
the median over seeds and repeats of the 2-worker / 1-worker ratio, with its range. Which engine fills a balanced
epoch of hidden lengths depends on the commit (the claimed engine up to 4b646bd; the hand-over policy of b685386,
reverted; groups on the schedule since session 5), so run the script on each to compare them (a worktree, with
``PYTHONPATH`` set to it and ``STREAMCLI_DATA`` where the data lies). ``--cheap`` measures what a balanced epoch
of hidden lengths costs where steps cost nothing (variant A's frames, B=16, T=8, 2 workers): batches/s over 600
batches after 20, per epoch.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.workloads import SkewedFrames, SyntheticFrames
from streamcli import StreamLoader


class HiddenLengths(SkewedFrames):
    """The same streams, their lengths not told: the loader finds each end as it reads."""

    def length(self, item: Any) -> int:
        return None  # type: ignore[return-value]  # (a source may say it does not know: StreamSource.length)


class HiddenFrames(SyntheticFrames):
    """Variant A's frames, their lengths not told."""

    def length(self, item: Any) -> int:
        return None  # type: ignore[return-value]  # (a source may say it does not know: StreamSource.length)


def cheap(epochs: int) -> None:
    rates = []
    for seed in range(epochs):
        with StreamLoader(HiddenFrames(64, 200, 2000), 16, 8, num_workers=2, seed=seed) as loader:
            it = iter(loader)
            for _ in range(20):
                next(it)
            t = time.perf_counter()
            for _ in range(600):
                next(it)
            rates.append(600 / (time.perf_counter() - t))
    print(
        f"cheap steps, lengths hidden, 2 workers: {statistics.median(rates):.0f} batches/s (epochs: "
        + ", ".join(f"{r:.0f}" for r in rates)
        + ")"
    )


def seconds(src: SkewedFrames, workers: int, seed: int, balance: bool | None) -> tuple[float, int]:
    with StreamLoader(src, 6, 8, num_workers=workers, seed=seed, boundary="pack", balance=balance) as loader:
        it = iter(loader)
        next(it)
        t = time.perf_counter()
        for _ in it:
            pass
        return time.perf_counter() - t, loader.stats.rows_moved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="steps burn CPU (default: they sleep)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cheap", action="store_true", help="frames that cost nothing: batches/s, 3 epochs")
    args = ap.parse_args()
    if args.cheap:
        cheap(3)
        return
    rows = [
        ("known", SkewedFrames, True),
        ("known", SkewedFrames, False),
        ("hidden", HiddenLengths, None),
        ("hidden", HiddenLengths, False),
    ]
    print("| lengths | balance | 2 workers / 1 worker, median (range) | rows moved, median |")
    print("|---|---|---|---|")
    for name, cls, balance in rows:
        src = cls(24, 100, 400, frame_cost_s=50e-6, sleep=not args.cpu)
        ratios, moved = [], []
        for _ in range(args.repeats):
            for seed in range(args.seeds):
                one, _ = seconds(src, 1, seed, None)
                two, m = seconds(src, 2, seed, balance)
                ratios.append(one / two)
                moved.append(m)
        said = {True: "on", False: "off", None: "default (on)"}[balance]
        print(
            f"| {name} | {said} | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
            f"| {statistics.median(moved):g} |"
        )


if __name__ == "__main__":
    main()
