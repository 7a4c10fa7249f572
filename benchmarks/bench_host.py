"""Benchmark: how this host itself scales a workload from 1 to 2 processes, with no loader involved.

    python benchmarks/bench_host.py               # about 30 s; 5 rounds, per-round figures and medians
    python benchmarks/bench_host.py --variant A8 --batches 4000  # A8's cheap frames: copies and Python alone
    python benchmarks/bench_host.py --repeats 1   # one round (a smoke run)
    python benchmarks/bench_host.py --json        # the medians as one JSON object (per-round lines on stderr)
    python benchmarks/bench_host.py --ring 20     # each process writes its batches into 20 arrays in turn
    python benchmarks/bench_host.py --disturb 2,120   # a third process wakes twice a batch for 120 us of CPU
    python benchmarks/bench_host.py --variant video   # two processes decoding the real clips (the video target)

The loader's B target asks 2 workers for >= 0.95 x (2 x the 1-worker rate) (``bench_loader.py``, ``report.py``).
That figure can be no better than what the machine gives two plain processes burning the same CPU: on a small
VM (2 vCPU KVM) the second core may be shared, throttled or stolen. This script measures that ceiling.

The source is built as the loader benchmark builds it (``VARIANTS["B"].source()``: 64 streams of 200-2000 steps,
100 us CPU per frame, 2 ms per open). Each process runs a hand-written loop: ``rows`` open streams, one
preallocated ``(T, rows, 3, 64, 64)`` uint8 array refilled step by step, the next of its items opened when a
stream ends. One process does all the work (120 batches of B=16, T=8; with ``--variant``, that workload's source
and its number of timed batches) with 16 rows; two spawned processes each do half (8 rows, the other half of the
items), released together by a barrier. Each process times only its loop
(``time.perf_counter``, start-up excluded); the 2-process rate is all frames / the slower process's time. Rounds
interleave 1 and 2 processes. The ratio 2-proc / (2 x 1-proc) is the host's ceiling for any loader's B scaling.

A loader also has a main process, which wakes for every batch. ``--disturb W,US`` adds a stand-in for it: a third
process that wakes W times per batch (at the pace the processes would keep with perfect scaling, from a first
undisturbed 1-process run) and burns US microseconds of CPU each time, in both the 1- and the 2-process runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable here and in spawn workers
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workloads import VARIANTS, SyntheticFrames, spin

B, T = 16, 8  # as in runner.py
STEP_VARIANTS = [name for name, v in VARIANTS.items() if not v.needs_blocks]  # ``fill`` reads single steps


def fill(
    src: SyntheticFrames, items: list[int], rows: int, batches: int, barrier: Barrier, ring: int = 1
) -> tuple[int, float]:
    """Write ``batches`` batches of ``(T, rows)`` frames from ``items`` (cycled if they run out), as a plain loop
    would, batch ``i`` into array ``i % ring``; return (frames written, seconds of the loop). The clock starts when
    every process reaches ``barrier``."""
    queue = itertools.cycle(items)
    arrays = np.zeros((ring, T, rows, 3, 64, 64), np.uint8)
    arrays.fill(1)  # touch every page before timing
    barrier.wait()
    t0 = time.perf_counter()
    its = [src.open(next(queue)) for _ in range(rows)]
    for i in range(batches):
        out = arrays[i % ring]
        for b in range(rows):
            for t in range(T):
                step = next(its[b], None)
                if step is None:
                    its[b] = src.open(next(queue))
                    step = next(its[b])
                out[t, b] = step["frame"]
    return batches * rows * T, time.perf_counter() - t0


def _child(
    src: SyntheticFrames,
    items: list[int],
    rows: int,
    batches: int,
    barrier: Barrier,
    res: Queue[tuple[int, float]],
    ring: int,
) -> None:
    res.put(fill(src, items, rows, batches, barrier, ring))


def _disturb(stop: Event, period: float, burn: float) -> None:
    """The stand-in for a loader's main process: wake every ``period`` seconds, burn ``burn`` seconds of CPU."""
    due = time.perf_counter()
    while not stop.is_set():
        due += period
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        spin(burn)


def run(
    src: SyntheticFrames,
    procs: int,
    ring: int = 1,
    disturb: tuple[float, float] | None = None,
    batches: int = VARIANTS["B"].batches,
) -> tuple[float, list[float]]:
    """(frames/s, each process's seconds) of ``procs`` spawned processes sharing the fixed amount of work;
    ``disturb`` = (seconds between wake-ups, CPU seconds per wake-up) of a third process running alongside."""
    ctx = mp.get_context("spawn")
    barrier, res, stop = ctx.Barrier(procs), ctx.Queue(), ctx.Event()
    items = list(src.items())
    ps = [
        ctx.Process(target=_child, args=(src, items[i::procs], B // procs, batches, barrier, res, ring))
        for i in range(procs)
    ]
    if disturb is not None:
        ps.append(ctx.Process(target=_disturb, args=(stop, *disturb), daemon=True))
    for p in ps:
        p.start()
    got: list[tuple[int, float]] = [res.get(timeout=300) for _ in range(procs)]
    stop.set()
    for p in ps:
        p.join()
        if p.exitcode:
            raise RuntimeError(f"worker exited with {p.exitcode}")
    secs = [s for _, s in got]
    return sum(n for n, _ in got) / max(secs), secs


def _wakes(text: str) -> tuple[float, float]:
    try:
        wakes, us = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not W,US (e.g. 2,120)") from None
    if wakes <= 0 or us < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: W must be > 0 and US >= 0")
    return wakes, us * 1e-6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="rounds, each one 1-process and one 2-process run")
    ap.add_argument("--variant", choices=[*STEP_VARIANTS, "video"], default="B",
                    help="the workload whose frames the processes make (default B, as the B target); video: each "
                         "process decodes the real clips as bench_video.py's bare loop, one FFmpeg thread")  # fmt: skip
    ap.add_argument("--frames", type=int, default=None,
                    help="video: frames each process decodes (default: every frame of every clip)")  # fmt: skip
    ap.add_argument("--batches", type=int, default=0,
                    help="batches per round (default: the workload's timed batches in bench_loader.py)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the medians as one JSON object on stdout")
    ap.add_argument("--ring", type=int, default=1,
                    help="write successive batches into this many arrays in turn, as a loader fills its slots "
                         "(its B runs have 20); default 1: one array, which stays in the caches")  # fmt: skip
    ap.add_argument("--disturb", metavar="W,US", type=_wakes,
                    help="run a third process alongside that wakes W times per batch for US microseconds of CPU, "
                         "as a loader's main process does (e.g. 2,120)")  # fmt: skip
    ap.add_argument("--folder", help="video: a folder of videos to decode (default: the project's real clips)")
    args = ap.parse_args()
    if args.folder is not None and args.variant != "video":
        ap.error(f"--folder {args.folder}: only the video variant decodes files; add --variant video")
    if args.variant == "video":
        if args.folder is not None:
            from benchmarks.videos import use_folder

            use_folder(args.folder)
        return video_main(args)
    variant = VARIANTS[args.variant]
    src, n = variant.source(), args.batches or variant.batches
    log = sys.stderr if args.json else sys.stdout
    pace: dict[int, tuple[float, float] | None] = {1: None, 2: None}
    if args.disturb is not None:
        wakes, burn = args.disturb
        batches_s = run(src, 1, args.ring, batches=n)[0] / (B * T)  # undisturbed, not counted
        pace = {n: (1 / (n * batches_s * wakes), burn) for n in (1, 2)}
        print(f"disturber: {wakes:g} wake-ups per batch, {burn * 1e6:.0f} us of CPU each, at {batches_s:.0f} "
              "batches/s per process", file=log)  # fmt: skip
    print(f"workload {variant.name}, {n} batches of B={B}, T={T} ({n * B * T} frames) into {args.ring} array(s) in "
          f"turn; os.cpu_count()={os.cpu_count()}", file=log)  # fmt: skip
    print("| round | 1 proc, frames/s | 2 procs, frames/s | 2-proc / (2 x 1-proc) | 2-proc seconds |", file=log)
    print("|---:|---:|---:|---:|---:|", file=log)
    one, two, ratios = [], [], []
    for r in range(args.repeats):
        r1, _ = run(src, 1, args.ring, pace[1], n)
        r2, secs = run(src, 2, args.ring, pace[2], n)
        one.append(r1)
        two.append(r2)
        ratios.append(r2 / (2 * r1))
        print(f"| {r} | {r1:.0f} | {r2:.0f} | {ratios[-1]:.3f} | {' / '.join(f'{s:.3f}' for s in secs)} |",
              file=log, flush=True)  # fmt: skip
    med = {
        "variant": variant.name,
        "repeats": args.repeats,
        "ring": args.ring,
        "disturb": args.disturb and [args.disturb[0], round(args.disturb[1] * 1e6, 3)],
        "one_proc_fps": statistics.median(one),
        "two_proc_fps": statistics.median(two),
        "ratio": statistics.median(ratios),
    }
    if args.json:
        print(json.dumps(med))
    else:
        print(f"\nmedian: 1 proc {med['one_proc_fps']:.0f} frames/s, 2 procs {med['two_proc_fps']:.0f} frames/s, "
              f"2-proc / (2 x 1-proc) {med['ratio']:.3f}")  # fmt: skip


def video_main(args: argparse.Namespace) -> None:
    """``--variant video``: the host's ceiling for the video target (2 workers >= 1.8x 1 worker, ``bench_video``)."""
    from benchmarks.videos import clip_paths, decode_round

    paths = clip_paths()
    log = sys.stderr if args.json else sys.stdout
    print(f"workload video: {len(paths)} clips, {args.frames or 'every'} frames per process, resized to 128x128, "
          f"one FFmpeg thread; each of the 2 processes decodes the same; os.cpu_count()={os.cpu_count()}",
          file=log)  # fmt: skip
    print("| round | 1 proc, s | 2 procs, slower s | 2-proc / (2 x 1-proc) |\n|---:|---:|---:|---:|", file=log)
    ratios = []
    for r in range(args.repeats):
        one, two, ratio = decode_round(paths, args.frames)
        ratios.append(ratio)
        print(f"| {r} | {one:.2f} | {two:.2f} | {ratio:.3f} |", file=log, flush=True)
    med = {"variant": "video", "repeats": args.repeats, "ratio": statistics.median(ratios),
           "rounds": [round(x, 3) for x in ratios]}  # fmt: skip
    if args.json:
        print(json.dumps(med))
    else:
        print(f"\nmedian 2-proc / (2 x 1-proc) {med['ratio']:.3f}; a 2-worker loader's 2w/1w can reach at most twice "
              "that")  # fmt: skip


if __name__ == "__main__":
    main()
