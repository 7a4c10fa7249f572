"""What ``streamcli bench`` concludes from its best result: the bottleneck, an imbalance, the scheduling line.

Prose for people, so it lives with the command; the library's ``streamcli.bench`` only measures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from streamcli.bench import BenchResult


def scheduling(r: BenchResult) -> str | None:
    """How the workers shared the streams (2 or more workers): the window they wrote ahead in, the rows that
    moved between them, whether rows went to whichever worker was free (``balance``); None in-process or when
    unknown."""
    if r.workers < 2 or not r.window:
        return None
    balanced = "; balanced: a row's next stream goes to whichever worker is free" if r.balanced else ""
    return f"window {r.window} batches ahead{balanced}; {r.rows_moved} rows moved to an idle worker"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x == x else "-"


def imbalance(r: BenchResult) -> str | None:
    """A description of uneven work between workers (busiest >= 80% and 30 points above the idlest), else None."""
    busy = r.busy_per_worker
    if r.workers < 2 or len(busy) < 2:
        return None
    hi, lo = int(np.argmax(busy)), int(np.argmin(busy))
    if busy[hi] < 0.8 or busy[hi] - busy[lo] <= 0.3:
        return None
    text = f"imbalanced: worker {hi} is {_pct(busy[hi])} busy, worker {lo} {_pct(busy[lo])}"
    names = r.stream_per_worker
    if len(names) > hi and names[hi]:
        text += f"; at the end it was reading {names[hi]!r}"
    return text + " (the work is not spread evenly over the workers)"


def bottleneck(r: BenchResult) -> str:
    """One line naming what limits this configuration."""
    if r.workers == 0:
        return (
            f"decode-bound, in-process: the consumer's own thread produces every step ({r.steps_per_s:.0f} steps/s, "
            f"waits {r.wait_p50_ms:.0f} ms p50); workers help when cores are free"
        )
    uneven = imbalance(r)
    if uneven is not None:
        return uneven
    busy = _pct(r.busy)
    if r.busy != r.busy:  # NaN: the timed run was shorter than the loader's load sampling
        if r.wait_p50_ms < 1.0:
            return (
                f"consumer-bound: batches are ready when asked (waits {r.wait_p50_ms:.2f} ms p50), workers - busy "
                "(load unknown: not measured in so short a run; use more --batches)"
            )
        return (
            f"unknown: worker load not measured (run more --batches); the consumer waits {r.wait_p50_ms:.1f} ms (p50)"
        )
    if r.busy >= 0.8 and r.wait_p50_ms >= 1.0:
        return f"decode-bound: workers {busy} busy, consumer waits {r.wait_p50_ms:.0f} ms (p50)"
    if r.wait_p50_ms < 1.0:
        return f"consumer-bound: batches are ready when asked (waits {r.wait_p50_ms:.2f} ms p50), workers {busy} busy"
    return f"hand-off-bound: workers {busy} busy but the consumer waits {r.wait_p50_ms:.1f} ms (p50)"
