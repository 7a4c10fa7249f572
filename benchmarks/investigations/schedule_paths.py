"""What the schedule's paths cost at a small batch: workload A8 in process (B=16, T=8), CPU µs a batch and a call.

    python benchmarks/investigations/schedule_paths.py           # about 10 s: 3 rounds of 400 batches

Issue 35 §3 asked whether one engine should plan a batch of 16 rows some cheaper way than the array pass built for
wide batches. Since issue 49 the schedule files each row under the batch of its next event: a batch where no row
has one is planned from the parts kept while nothing changes (``Schedule._steady``), any other plans the rows of
its events (``Schedule.close_batch``, and ``_cross`` for each row that crosses a stream's end, one by one in
Python). This times each path per call, with the events on (as shipped) and off (``Schedule.EVENTS = False``:
every row planned in every batch), so the pass over every row can be set against planning all 16 rows one by one
at ``_cross``'s cost a row. The timers wrap the methods (``time.thread_time``, about a µs a call). The trees before
issue 49 name the paths ``_steady``, ``_close``, ``_measure`` and the switch ``STRETCHES``: the script times those
where it finds them.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.workloads import workload
from streamcli import StreamLoader
from streamcli.scheduled import schedule

B, T, WARMUP = 16, 8, 20
STAGES = tuple(
    name
    for name in ("next_plan", "_steady", "close_batch", "_close", "_cross", "_walk", "_measure")
    if hasattr(schedule.Schedule, name)
)
SWITCH = "EVENTS" if hasattr(schedule.Schedule, "EVENTS") else "STRETCHES"  # (its name before issue 49)


def timed(fn: Callable[..., Any], label: str, spent: dict[str, float], calls: collections.Counter[str]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        c0 = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.thread_time() - c0
            calls[label] += 1

    return wrapper


def run(stretch: bool, n: int) -> tuple[dict[str, float], dict[str, float]]:
    """µs a batch and µs a call of each stage over ``n`` batches."""
    spent: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    cls = schedule.Schedule
    saved = {name: getattr(cls, name) for name in STAGES}
    old_stretch = getattr(cls, SWITCH)
    setattr(cls, SWITCH, stretch)
    for name, fn in saved.items():
        setattr(cls, name, timed(fn, name, spent, calls))
    try:
        with StreamLoader(workload("A8"), B, T, boundary="pad", epoch_end="pad") as loader:
            it = iter(loader)
            for _ in range(WARMUP):
                next(it)
            spent.clear()
            calls.clear()
            for _ in range(n):
                next(it)
    finally:
        for name, fn in saved.items():
            setattr(cls, name, fn)
        setattr(cls, SWITCH, old_stretch)
    per_batch = {k: 1e6 * spent[k] / n for k in STAGES}
    per_call = {k: 1e6 * spent[k] / calls[k] if calls[k] else 0.0 for k in STAGES}
    per_batch.update({f"{k} calls": calls[k] / n for k in STAGES})
    return per_batch, per_call


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=400, help="timed batches a run (at most 500: one A8 epoch)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or not 1 <= args.batches <= 500:
        ap.error(f"--rounds {args.rounds} --batches {args.batches}: need rounds >= 1 and 1 <= batches <= 500")
    import torch

    torch.set_num_threads(1)
    got: dict[bool, list[tuple[dict[str, float], dict[str, float]]]] = {True: [], False: []}
    for r in range(args.rounds):
        for stretch in (True, False)[:: -1 if r % 2 else 1]:
            got[stretch].append(run(stretch, args.batches))
    print(
        f"A8 in process, B={B}, T={T}: the schedule's paths, medians of {args.rounds} rounds "
        f"of {args.batches} batches\n"
    )
    print(f"| {SWITCH.lower()} | stage | calls a batch | µs a call | µs a batch |")
    print("|---|---|---:|---:|---:|")
    for stretch, runs in got.items():
        for stage in STAGES:
            calls = statistics.median(p[f"{stage} calls"] for p, _ in runs)
            each = statistics.median(c[stage] for _, c in runs)
            batch = statistics.median(p[stage] for p, _ in runs)
            print(f"| {'on' if stretch else 'off'} | {stage} | {calls:.2f} | {each:.1f} | {batch:.1f} |")
    close = statistics.median(c["_close" if "_close" in STAGES else "close_batch"] for _, c in got[False])
    walk = "_walk" if "_walk" in STAGES else "_cross"  # (``_walk`` since issue 49's session 3)
    cross = statistics.median(c[walk] for _, c in got[False])
    print(
        f"\nevery row planned: {close:.0f} µs a batch; {B} rows one by one at {walk}'s {cross:.1f} µs a row: "
        f"{B * cross:.0f} µs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
