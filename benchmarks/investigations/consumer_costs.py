"""The main process's CPU a batch with workers, by stage (issue 49, session 4): workload A8, B=16, T=8.

    python benchmarks/investigations/consumer_costs.py                     # 2 workers, 3 runs of 400 batches
    python benchmarks/investigations/consumer_costs.py --workers 0 --runs 5

Each stage is a function of the main process wrapped in a CPU timer (``time.thread_time_ns``) that counts its
exclusive time: a wrapped callee's time is its own stage, not its caller's. ``next() total`` is the main thread's
CPU over the timed batches; ``next() own`` is what no wrapper took (the loader's generator, the counters, the
position's move); ``other threads`` is the process's CPU minus the main thread's (the ready-queue thread, torch).
Stages that a tree does not have are left out, so the same script times an older tree.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable here and in spawn workers
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.runner import B, T
from benchmarks.workloads import VARIANTS

# (module, attribute path, stage); missing ones are skipped
TARGETS = [
    ("streamcli.workers.pool", "WorkerPool.wait_batch", "wait on the pipes"),
    ("streamcli.workers.pool", "WorkerPool.drain", "wait on the pipes"),
    ("streamcli.shared.ready_queue", "ReadyQueue._take", "ready-queue hand-off"),  # (before issue 49, session 4)
    ("streamcli.shared.ready_queue", "ReadyQueue._make", "ready-queue hand-off"),
    ("streamcli.handout", "ReadyQueue._take", "ready-queue hand-off"),
    ("streamcli.handout", "ReadyQueue._make", "ready-queue hand-off"),
    ("streamcli.handout", "HandOut.assemble", "assemble"),
    ("streamcli.handout", "HandOut._prepare", "gen: prepare (its own lines)"),
    ("streamcli.handout", "HandOut.fill_window", "publish slots"),
    ("streamcli.handout", "HandOut._note_busy", "counters"),
    ("streamcli.handout", "HandOut.take", "take the slot"),
    ("streamcli.iteration", "Iteration._hand", "move the position"),
    ("streamcli.iteration", "Iteration._costly_and_uneven", "counters"),
    ("streamcli.shared.slots", "Slots._reclaim", "slot's return"),
    ("streamcli.shared.slots", "Slots.take", "take the slot"),
    ("streamcli.shared.slots", "Slots.lend", "assemble"),
    ("streamcli.fills.flags", "any_dry", "cursors"),
    ("streamcli.fills.flags", "live_rows", "cursors"),
    ("streamcli.handout", "any_dry", "cursors"),
    ("streamcli.handout", "live_rows", "cursors"),
]


class Timers:
    def __init__(self) -> None:
        self.spent: dict[str, int] = collections.defaultdict(int)
        self.calls: dict[str, int] = collections.defaultdict(int)
        self.local = threading.local()
        self.main = threading.main_thread()

    def wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        if label.startswith("gen: "):  # a generator function: time each resumption of the generator it returns
            label, step = label[5:], self.wrap(lambda g: next(g), label[5:])

            def gen(*args: Any, **kwargs: Any) -> Any:
                g = fn(*args, **kwargs)
                try:
                    while True:
                        try:
                            item = step(g)
                        except StopIteration as stop:
                            return stop.value
                        yield item
                finally:
                    g.close()

            return gen
        clock, spent, calls, local, main = time.thread_time_ns, self.spent, self.calls, self.local, self.main

        def timed(*args: Any, **kwargs: Any) -> Any:
            label_ = "thread: " + label if threading.current_thread() is not main else label
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = [0]
            stack.append(0)
            c0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                took = clock() - c0
                child = stack.pop()
                spent[label_] += took - child
                calls[label_] += 1
                stack[-1] += took

        return timed


def one_run(variant: str, workers: int, batches: int) -> dict[str, float]:
    from streamcli import StreamLoader

    timers = Timers()
    saved = []
    for mod_name, path, label in TARGETS:
        *owner_path, name = path.split(".")
        try:
            owner: Any = importlib.import_module(mod_name)
            for part in owner_path:
                owner = getattr(owner, part)
            fn = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        except (ImportError, AttributeError, KeyError):
            continue
        saved.append((owner, name, fn))
        setattr(owner, name, timers.wrap(fn, label))
    try:
        with StreamLoader(VARIANTS[variant].source(), B, T, num_workers=workers) as loader:
            it = iter(loader)
            for _ in range(20):
                next(it)
            timers.spent.clear()
            timers.calls.clear()
            r0, c0 = resource.getrusage(resource.RUSAGE_SELF), time.thread_time_ns()
            for _ in range(batches):
                next(it)
            main_ns, r1 = time.thread_time_ns() - c0, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    proc_ns = 1e9 * ((r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime))
    main_raw = main_ns
    # A timer's own cost (two clock reads, a few µs): measured on a wrapped no-op, taken off each call's stage
    # and off the main thread's total.
    probe = Timers()
    noop = probe.wrap(lambda: None, "noop")
    outer = probe.wrap(lambda: noop(), "outer")
    for _ in range(2000):
        outer()
    own = probe.spent["noop"] / 2000  # what a call's stage gets of its own timer
    per_call = (probe.spent["outer"] + probe.spent["noop"]) / 2000 - own  # what the caller gets: the rest
    wrapped_calls = sum(v for k, v in timers.calls.items() if not k.startswith("thread: "))
    main_ns -= round(wrapped_calls * (own + per_call))
    out = {k: (v - timers.calls[k] * own) / 1e3 / batches for k, v in timers.spent.items()}
    out["calls a batch (main thread)"] = wrapped_calls / batches
    main_wrapped = sum(v - timers.calls[k] * own for k, v in timers.spent.items() if not k.startswith("thread: "))
    out["next() own"] = (main_ns - main_wrapped) / 1e3 / batches
    out["next() total (main thread)"] = main_ns / 1e3 / batches
    out["other threads"] = max(0.0, proc_ns - main_raw) / 1e3 / batches
    out["process total (timers taken off)"] = (proc_ns - main_raw + main_ns) / 1e3 / batches
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="A8", choices=tuple(VARIANTS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs = [one_run(args.variant, args.workers, args.batches) for _ in range(args.runs)]
    keys = sorted({k for r in runs for k in r}, key=lambda k: (k.startswith(("next()", "other", "process")), k))
    print(f"{args.variant}, {args.workers} workers, B={B}, T={T}: main-process CPU µs a batch, median of {args.runs}")
    print("| stage | µs a batch |\n|---|---:|")
    for k in keys:
        xs = sorted(r.get(k, 0.0) for r in runs)
        print(f"| {k} | {statistics.median(xs):.1f} ({xs[0]:.0f}-{xs[-1]:.0f}) |")


if __name__ == "__main__":
    main()
