"""Where an in-process batch's time goes: the cost model of issue 35 §3, workload A8 at B=16, T=8, in CPU µs a batch.

    python benchmarks/bench_loader_costs.py                  # about 30 s: 5 interleaved rounds of 300 batches
    python benchmarks/bench_loader_costs.py --rounds 3 --batches 200

Five readers of the same source (``workloads.ChunkedFrames``: frames made 8 per numpy call, yielded one step at
a time), run one after the other in each round, the order reversed every other round:

- **bare**: ``next()`` and one copy per step into one preallocated ``(T, B, 3, 64, 64)`` array; no flags, no
  schedule, no determinism rule (the floor any loader pays for this source);
- **bare over the slots**: the same loop into as many arrays as the in-process loader turns over (counted by
  the batches' buffers: the consumer drops each batch, so the slot freed last is refilled), one after the
  other: what writing into a slot that is no longer in the core's cache adds to the bare loop;
- **seqtools in-process**: the benchmark's seqtools job (``_peers.PlannedBatches``): a fresh zeroed array per
  batch, the planned (item, position) of each row read from an array, one copy per step;
- **streamcli**: ``StreamLoader(num_workers=0)``, as the consumer sees it;
- **streamcli, by stage**: the same with the functions that make each stage wrapped in CPU timers
  (``time.thread_time``; the wrappers add well under a µs a call, 8 calls a batch).

CPU time, not wall time: on a shared host a descheduled process loses wall time but not CPU time; CPU time still
grows when another process shares the core's caches, so the stages are compared within a round, and each figure
is the median of the rounds. The stages: ``schedule`` (the plan of the batch), ``flags`` and ``summary`` (the
flags, then the cursors and counts), ``rows`` (every row's steps: the source, the copies, and the per-row and
per-step work of the reader), ``fill glue`` (the rest of producing the batch), ``hand-out`` (the batch's
tensors) and ``rest of next()`` (waiting, the slot's bookkeeping, reading the summary, moving the position).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._peers import PlannedBatches, item_order, plan_rows
from benchmarks.workloads import ChunkedFrames, fill_by_hand

B, T = 16, 8
WARMUP = 20


def bare(src: ChunkedFrames, n: int, slots: int = 1) -> float:
    """The bare loop into one array, or into ``slots`` arrays in turn (as the loader's ring hands its slots)."""
    items = list(src.items())
    its = [iter(src.open(i)) for i in items[:B]]
    queue = iter(items[B:])
    outs = [np.zeros((T, B, 3, 64, 64), np.uint8) for _ in range(slots)]
    c0 = time.thread_time()
    for k in range(n):
        fill_by_hand(src, its, queue, outs[k % slots])
    return time.thread_time() - c0


def ring_slots(src: ChunkedFrames) -> int:
    """The slots the in-process loader turns over at this B, T, as this benchmark's consumer uses it (each batch
    dropped at the next ``next()``): the distinct buffers of its first batches, not the ring's size."""
    from streamcli import StreamLoader

    with StreamLoader(src, B, T, boundary="pad", epoch_end="pad") as loader:
        seen = set()
        for i, batch in enumerate(loader):
            seen.add(next(iter(batch.data.values())).data_ptr())
            if i >= 32:
                break
        del batch
        return len(seen)


def seqtools_jobs(src: ChunkedFrames, n: int) -> float:
    jobs = PlannedBatches(src, plan_rows(src, item_order(src, 0), B, T), T, 1)
    for j in range(WARMUP):
        jobs[j]
    c0 = time.thread_time()
    for j in range(WARMUP, WARMUP + n):
        jobs[j]
    return time.thread_time() - c0


def streamcli(src: ChunkedFrames, n: int, start: Callable[[], None] = lambda: None) -> float:
    """``n`` batches after the warm-up ones; ``start()`` is called as the timing starts."""
    from streamcli import StreamLoader

    with StreamLoader(src, B, T, boundary="pad", epoch_end="pad") as loader:
        it = iter(loader)
        for _ in range(WARMUP):
            next(it)
        start()
        c0 = time.thread_time()
        for _ in range(n):
            next(it)
        return time.thread_time() - c0


class Stages:
    """CPU seconds spent in each wrapped function during a staged run (``run``)."""

    def __init__(self) -> None:
        from streamcli import handout
        from streamcli.fills import iterators, planned

        planner: Any
        # The schedule plans every batch itself (``steady.py`` went with issue 49's per-row events); from
        # 2026-11-28 until session 5 a ``Steady`` wrapper planned its steady batches.
        try:
            planner = importlib.import_module("streamcli.scheduled.steady").Steady
        except (ImportError, AttributeError):
            planner = importlib.import_module("streamcli.scheduled.schedule").Schedule

        self.targets: list[tuple[Any, str, str]] = [
            (planner, "next_plan", "schedule"),
            (planned, "write_flags", "flags"),
            (planned, "write_marks", "flags"),  # (in process from issue 49, session 4: the other flags when read)
            (planned, "write_ids", "flags"),
            (iterators.Rows, "fill", "rows"),
            (planned, "write_summary", "summary"),
            (planned.Filler, "fill_batch", "fill"),
            (planned.Filler, "fill_until", "fill"),  # (before issue 49)
            (handout.HandOut, "assemble", "hand-out"),
        ]
        self.targets = [t for t in self.targets if hasattr(t[0], t[1])]
        self.spent: dict[str, float] = collections.defaultdict(float)

    def _timed(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        clock, spent = time.thread_time, self.spent

        def timed(*args: Any, **kwargs: Any) -> Any:
            c0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] += clock() - c0

        return timed

    def run(self, src: ChunkedFrames, n: int) -> dict[str, float]:
        """One staged run: µs a batch per stage."""
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in self.targets]
        for (owner, name, label), (_, _, fn) in zip(self.targets, saved, strict=True):
            setattr(owner, name, self._timed(fn, label))
        try:
            total = streamcli(src, n, start=self.spent.clear)
        finally:
            for owner, name, fn in saved:
                setattr(owner, name, fn)
        per = {k: 1e6 * v / n for k, v in self.spent.items()}
        inner = sum(per.get(k, 0.0) for k in ("schedule", "flags", "rows", "summary"))
        out = {k: per.get(k, 0.0) for k in ("schedule", "flags", "summary", "rows")}
        out["fill glue"] = per.get("fill", 0.0) - inner
        out["hand-out"] = per.get("hand-out", 0.0)
        out["outcome"] = per.get("outcome", 0.0)
        out["rest of next()"] = 1e6 * total / n - per.get("fill", 0.0) - out["hand-out"] - out["outcome"]
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each running every reader once (default 5)")
    ap.add_argument("--batches", type=int, default=300, help="timed batches a run (default 300)")
    args = ap.parse_args(argv)
    if args.rounds < 1 or not 1 <= args.batches <= 400:
        ap.error(f"--rounds {args.rounds} --batches {args.batches}: need rounds >= 1 and 1 <= batches <= 400")
    import torch

    torch.set_num_threads(1)
    src, n = ChunkedFrames(64, 200, 2000), args.batches
    stages = Stages()
    slots = ring_slots(src)
    readers: dict[str, Callable[[], Any]] = {
        "bare": lambda: 1e6 * bare(src, n) / n,
        "bare over the slots": lambda: 1e6 * bare(src, n, slots) / n,
        "seqtools": lambda: 1e6 * seqtools_jobs(src, n) / n,
        "streamcli": lambda: 1e6 * streamcli(src, n) / n,
        "staged": lambda: stages.run(src, n),
    }
    got: dict[str, list[Any]] = {name: [] for name in readers}
    for r in range(args.rounds):
        for name in list(readers)[:: -1 if r % 2 else 1]:
            got[name].append(readers[name]())

    def med(xs: Iterator[float] | list[float]) -> str:
        xs = sorted(xs)
        spread = f" ({xs[0]:.0f}-{xs[-1]:.0f})" if len(xs) > 1 else ""
        return f"{statistics.median(xs):.0f}{spread}"

    print(f"A8 in-process, B={B}, T={T}: CPU µs a batch, median of {args.rounds} rounds (range), {n} batches a run\n")
    print("| reader or stage | µs a batch |")
    print("|---|---:|")
    for name in ("bare", "bare over the slots", "seqtools", "streamcli"):
        label = f"bare over the ring's {slots} slots in turn" if name == "bare over the slots" else name
        print(f"| {label} | {med(got[name])} |")
    for stage in got["staged"][0]:
        print(f"| streamcli: {stage} | {med([s[stage] for s in got['staged']])} |")
    over = [s["rows"] - b for s, b in zip(got["staged"], got["bare"], strict=True)]
    print(f"| streamcli: rows over the bare loop (the reader's per-row and per-step work) | {med(over)} |")
    over = [s["rows"] - b for s, b in zip(got["staged"], got["bare over the slots"], strict=True)]
    print(f"| streamcli: rows over the bare loop over the slots (the same, less the colder slots) | {med(over)} |")
    ratios = [b / a for a, b in zip(got["streamcli"], got["seqtools"], strict=True)]
    bares = [b / a for a, b in zip(got["streamcli"], got["bare"], strict=True)]
    print(f"\nstreamcli against seqtools in-process, batches per CPU second: {med_ratio(ratios)}")
    print(f"streamcli against the bare loop: {med_ratio(bares)}")
    return 0


def med_ratio(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{statistics.median(xs):.2f}x" + (f" (rounds {xs[0]:.2f}-{xs[-1]:.2f})" if len(xs) > 1 else "")


if __name__ == "__main__":
    sys.exit(main())
