"""Benchmark: how often the loader's main process wakes per batch, and what that costs the workers.

    python benchmarks/bench_wakeups.py                 # workload B, 2 workers, 3 runs of 120 batches (~20 s)
    python benchmarks/bench_wakeups.py --variant A8 --batches 400

On a machine with as many cores as workers, every wake-up of the main process takes a core from a worker for a
while. This prints, per batch, each main-process thread's voluntary context switches (sleeps, hence wake-ups)
and the workers' involuntary ones (preemptions), read from ``/proc/<pid>/task/*/status`` (Linux), with the main
process's CPU time per batch. ``benchmarks/bench_host.py --disturb W,US`` measures what such wake-ups cost two
plain processes.
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable here and in spawn workers
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.runner import B, T
from benchmarks.workloads import VARIANTS
from streamcli import StreamLoader


def switches(pid: int) -> dict[str, tuple[int, int]]:
    """(voluntary, involuntary) context switches of each thread of ``pid``, by thread name and id."""
    out = {}
    for path in glob.glob(f"/proc/{pid}/task/*/status"):
        fields = dict(line.split(":\t", 1) for line in Path(path).read_text().splitlines() if ":\t" in line)
        name = f"{fields['Name'].strip()}[{path.split('/')[-2]}]"
        out[name] = (int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"]))
    return out


def one_run(variant: str, workers: int, batches: int) -> dict[str, float]:
    """Per batch: the main process's sleeps (all threads), the workers' preemptions, main CPU (us); batches/s."""
    with StreamLoader(VARIANTS[variant].source(), B, T, num_workers=workers) as loader:
        it = iter(loader)
        for _ in range(20):
            next(it)
        assert loader._pool is not None
        pids = [os.getpid()] + [p.pid for p in loader._pool.procs]
        before = [switches(p) for p in pids]
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(batches):
            next(it)
        r1, dt = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
        after = [switches(p) for p in pids]

    def delta(i: int, col: int) -> float:
        return sum(v[col] - before[i].get(k, (0, 0))[col] for k, v in after[i].items()) / batches

    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return {
        "batches_s": batches / dt,
        "main_sleeps": delta(0, 0),
        "worker_preemptions": sum(delta(i, 1) for i in range(1, len(pids))),
        "main_cpu_us": cpu / batches * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", default="B", choices=tuple(VARIANTS), help="workload (default B)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--batches", type=int, default=120, help="timed batches per run (default 120)")
    ap.add_argument("--repeats", type=int, default=3, help="runs; medians are printed (default 3)")
    args = ap.parse_args()
    if not os.path.exists("/proc/self/task"):
        raise SystemExit("bench_wakeups.py reads /proc/<pid>/task: Linux only")
    runs = [one_run(args.variant, args.workers, args.batches) for _ in range(args.repeats)]
    print(f"workload {args.variant}, {args.workers} workers, {args.batches} batches of B={B}, T={T}; medians of "
          f"{args.repeats} runs\n")  # fmt: skip
    print("| batches/s | main-process sleeps per batch | worker preemptions per batch | main CPU per batch |")
    print("|---:|---:|---:|---:|")
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"| {med['batches_s']:.1f} | {med['main_sleeps']:.2f} | {med['worker_preemptions']:.2f} | "
          f"{med['main_cpu_us']:.0f} us |")  # fmt: skip


if __name__ == "__main__":
    main()
