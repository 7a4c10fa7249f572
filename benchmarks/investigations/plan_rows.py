"""What planning every row costs against planning half (the balanced policy on the one schedule, issue 35 §1).

    python benchmarks/investigations/plan_rows.py

Under the balanced policy every producer plans every row and writes those it owns (``fills.balanced``); with
fixed blocks of two producers each plans its half. Both make every claim (lengths known). CPU time per batch of
``Schedule.next_plan``, medians of 5 interleaved rounds of 400 batches, over 4000 streams of random lengths.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from streamcli.scheduled import cursor as _cursor
from streamcli.scheduled.schedule import Schedule

CASES = [(16, 8, 20, 200), (16, 8, 2, 12), (1024, 8, 20, 200), (1024, 64, 20, 400)]  # B, T, lengths lo..hi


def per_batch_us(order: np.ndarray, B: int, T: int, rows: tuple[int, int] | None, batches: int = 400) -> float:
    sched = Schedule(order, _cursor.fresh(B), 0, 0, T=T, pack=True, segment=0, restream=True, rows=rows)
    t0 = time.process_time()
    for _ in range(batches):
        sched.next_plan()
    return (time.process_time() - t0) / batches * 1e6


def main() -> None:
    rng = np.random.default_rng(0)
    for B, T, lo, hi in CASES:
        lengths = rng.integers(lo, hi, 4000)
        order = np.array([(i, 0, 0, int(n)) for i, n in enumerate(lengths)], np.int64)
        every, half = [], []
        for _ in range(5):
            every.append(per_batch_us(order, B, T, None))
            half.append(per_batch_us(order, B, T, (0, B // 2)))
        a, h = statistics.median(every), statistics.median(half)
        print(f"B={B} T={T} lengths {lo}-{hi}: every row {a:.0f} us, half {h:.0f} us per batch ({a / h:.2f}x)")


if __name__ == "__main__":
    main()
