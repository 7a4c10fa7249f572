"""The balanced policy on the schedule (``fills.balanced``) against the claimed engine (``fills.claimed``).

    python benchmarks/investigations/balanced_vs_claimed.py          # sleeping steps: the scheduling alone
    python benchmarks/investigations/balanced_vs_claimed.py --cpu    # steps that burn CPU

``bench_balance.py``'s workload (24 streams of 100-400 steps, 3 heavy; B=6, T=8, "pack"), 2 workers,
``balance=True``, lengths known. The claimed engine runs by patching ``writers.choose`` to pick it; the workers are
forked so that they inherit the patch. Interleaved, medians of 3 epochs per seed. Obsolete once ``fills/claimed``
is gone (issue 35 §1, increment 5).
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

from benchmarks.workloads import SkewedFrames
from streamcli import StreamLoader
from streamcli.fills import writers

_CHOOSE = writers.choose


def _claimed(**kw: Any) -> writers.Planned | None:
    policy = _CHOOSE(**kw)
    return writers.BALANCED if isinstance(policy, writers.Balanced) else policy


def epoch(src: SkewedFrames, seed: int, claimed: bool) -> tuple[float, int]:
    """(steps per second after the first batch, rows moved) of one epoch."""
    writers.choose = _claimed if claimed else _CHOOSE
    kw: dict[str, Any] = dict(num_workers=2, seed=seed, boundary="pack", balance=True, mp_context="fork")
    with StreamLoader(src, 6, 8, **kw) as loader:
        it = iter(loader)
        steps = int(next(it).valid.sum())
        t = time.perf_counter()
        steps += sum(int(b.valid.sum()) for b in it)
        return steps / (time.perf_counter() - t), loader.stats.rows_moved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="steps burn CPU instead of sleeping")
    args = ap.parse_args()
    src = SkewedFrames(24, 100, 400, frame_cost_s=50e-6, sleep=not args.cpu)
    ratios = []
    for seed in range(5):
        new, old, moved_new, moved_old = [], [], [], []
        for _ in range(3):
            rate, moved = epoch(src, seed, claimed=False)
            new.append(rate)
            moved_new.append(moved)
            rate, moved = epoch(src, seed, claimed=True)
            old.append(rate)
            moved_old.append(moved)
        a, b = statistics.median(new), statistics.median(old)
        ratios.append(a / b)
        print(
            f"seed {seed}: schedule {a:.0f} steps/s (moved {statistics.median(moved_new):.0f}), "
            f"claimed {b:.0f} (moved {statistics.median(moved_old):.0f}), {a / b:.2f}x",
            flush=True,
        )
    print(f"median schedule/claimed {statistics.median(ratios):.2f}x ({'CPU' if args.cpu else 'sleeping'} steps)")


if __name__ == "__main__":
    main()
