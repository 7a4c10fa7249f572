"""What ``streamcli bench`` concludes from its best result: the bottleneck, an imbalance, the scheduling line.

Prose for people, so it lives with the command; the library's ``streamcli.bench`` only measures.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def workers_verdict(results: Sequence[BenchResult]) -> str | None:
    """Whether workers beat the in-process loader, by the figures of this sweep: the best worker count against
    ``workers=0`` (of the same loader name); None unless both were measured.

    Workers pay a hand-off per batch (the step is written to shared memory, then the consumer is told), so with
    cheap steps they lose: that is said, with the ratio and why, never contradicted by a general rule.
    """
    ours = [r for r in results if r.name == results[0].name] if results else []
    inproc = next((r for r in ours if r.workers == 0), None)
    pooled = [r for r in ours if r.workers > 0]
    if inproc is None or not pooled or inproc.steps_per_s <= 0:
        return None
    best = max(pooled, key=lambda r: r.steps_per_s)
    n = f"{best.workers} worker{'s' if best.workers != 1 else ''}"
    if best.steps_per_s >= inproc.steps_per_s:
        gain = best.steps_per_s / inproc.steps_per_s
        figures = f"{best.steps_per_s:,.0f} vs {inproc.steps_per_s:,.0f} steps/s"
        return f"workers help: {n} give {gain:.1f}x in-process ({figures})"
    slower = inproc.steps_per_s / max(best.steps_per_s, 1e-9)
    return (
        f"workers lose: in-process gives {inproc.steps_per_s:,.0f} steps/s, the best of the workers ({n}) "
        f"{best.steps_per_s:,.0f}, {slower:.1f}x slower; the steps are cheaper than the hand-off (each batch a "
        "worker writes to shared memory and passes to this process): use -w 0 (num_workers=0), or give each "
        "worker more work per hand-off (a window() member, block_steps, a larger -b/-t)"
    )


def bottleneck(r: BenchResult, results: Sequence[BenchResult] = ()) -> str:
    """One line naming what limits this configuration; ``results`` (the whole sweep) lets the in-process line say
    what the workers measured instead of guessing."""
    if r.workers == 0:
        line = (
            f"in-process: the consumer's own thread produces every step ({r.steps_per_s:.0f} steps/s, "
            f"waits {r.wait_p50_ms:.0f} ms p50)"
        )
        if workers_verdict(results) is not None:
            return line + "; the workers measured were slower (see the verdict)"
        return line + "; measure workers beside it (-w 0 -w 2) to see whether they help"
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
