"""Benchmark: the video source over the real clips, next to a bare ``cv2.VideoCapture`` loop; the camera.

    python benchmarks/bench_video.py               # full run, a few minutes; prints a Markdown table
    python benchmarks/bench_video.py --repeats 1   # smoke run
    python benchmarks/bench_video.py --no-bare --no-camera   # only the worker-scaling rows
    python benchmarks/bench_video.py --no-bare --no-camera --balance off   # rows in fixed blocks per worker
    python benchmarks/bench_video.py --folder ~/clips         # on your own videos

Every row decodes the same files (the usable clips under ../shared/data/video, $STREAMCLI_DATA/video or --folder)
and does the same per-frame work: resize to 128x128 with INTER_LINEAR, BGR->RGB, HWC->CHW. Each row is
the median of ``--repeats`` timed passes after one untimed warm-up pass (page cache, worker start-up).
Frames/s counts real (valid) frames only. Ratios are against the bare loop with OpenCV's default threads
(the "bare" row). The scaling rows (issue 8's target) alternate a 1-worker pass and a 2-worker pass, round after
round, so that the host's drift hits both alike, and give the median of the rounds' ratios. Then three estimates from
each clip's decode cost, and the share of each that was measured: what 2 workers would gain if no producer ran
ahead of the batch being assembled (lockstep), what an ideal scheduler could gain writing at most the loader's
``window`` of batches ahead (``workloads.windowed_figure``), and the most any loader that reads each stream in
order could gain (``stream_bound``: the epoch takes at least its costliest stream). The ratio also comes in two
parts, from the workers' busy seconds (``LoaderStats.worker_busy_s``): the share of the 2-worker passes' time that
both workers were busy (the scheduler's part), and the worker-seconds the same epoch took with 2 workers against 1
(the host's part: decoding costs more while both cores decode). After each round, the host's own
figure: two plain decoders at once against one (``videos.decode_round``); on this host they gain 1.2-2.2x over
one from minute to minute, so each round's ratio is also given as a share of the host's figure then.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streamcli_sources.camera import CameraSource
from streamcli_sources.video import VideoSource

from benchmarks.videos import SIZE, bare, clip_paths, data_dir, decode_round, use_folder
from benchmarks.workloads import scaling_figures, windowed_figure
from streamcli import StreamLoader

# Frames each plain decoder reads for the host's figure after each scaling round (2-4 s a round): on this VM two
# plain decoders gain 1.2-2.2x over one from minute to minute (``bench_host.py --variant video``).
HOST_FRAMES = 2000
B, T = 8, 16
# Rows advance together (within prefetch batches), so one 3,544-frame clip (65% of all frames) would leave the
# other rows, and the other worker, idle for most of the run; segments spread long clips over rows (segment=).
SEGMENT = 128
BARE, CAM = "bare cv2 loop, OpenCV default threads", "CameraSource.open, in-process"


def direct(src: VideoSource | CameraSource) -> int:
    """The source's own iterators, one stream after another (no loader)."""
    items: list[Any] = list(src.items())
    return sum(1 for item in items for _ in src.open(item))


def through_loader(loader: StreamLoader, layouts: list[list[np.ndarray]] | None = None) -> int:
    """Frames through one epoch; with ``layouts``, also note where every row's steps come from (for the bound)."""
    n, layout = 0, []
    for batch in loader:
        n += int(batch.valid.sum())
        if layouts is not None:  # item of every valid step (-1 padding), and -2 where a stream starts mid-item
            where = np.where(batch.valid.numpy(), batch.stream.numpy(), -1)
            layout.append(np.where(batch.is_first.numpy() & (batch.position.numpy() > 0), -2 - where, where))
    if layouts is not None:
        layouts.append(layout)
    return n


def item_costs(segment: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item, single-threaded as in a worker: seconds per decoded frame, seconds to open it mid-file (a seek,
    where a segment starts), and its frame count."""
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = VideoSource(data_dir(), size=SIZE, scan=True, threads=1)
        items = list(one.items())
    frame_s, seek_s, frames = np.zeros(len(items)), np.zeros(len(items)), np.zeros(len(items), np.int64)
    for i, item in enumerate(items):
        t = time.perf_counter()
        n = frames[i] = sum(1 for _ in one.open(item))
        frame_s[i] = (time.perf_counter() - t) / max(n, 1)
        if n > segment > 0:
            t = time.perf_counter()
            next(iter(one.open(item, segment)))
            seek_s[i] = max(0.0, time.perf_counter() - t - frame_s[i])
    cv2.setNumThreads(threads)
    return frame_s, seek_s, frames


def stream_bound(frames: np.ndarray, frame_s: np.ndarray, seek_s: np.ndarray, segment: int, workers: int = 2) -> float:
    """The most ``workers`` producers could gain over one on an epoch of every stream once, for any loader that
    reads a stream in order (a decoder cannot be split): the epoch takes at least its costliest stream, and at
    least the whole work shared evenly. A segment is a stream of its own, which costs a seek where it starts
    mid-file."""
    costs: list[float] = []
    for n, f, seek in zip(frames.tolist(), frame_s.tolist(), seek_s.tolist(), strict=True):
        starts = range(0, n, segment) if segment else [0]
        costs += [min(segment or n, n - s) * f + (seek if s else 0.0) for s in starts]
    serial = sum(costs)
    return float(serial / max(serial / workers, max(costs)))


def row_costs(layout: list[np.ndarray], frame_s: np.ndarray, seek_s: np.ndarray) -> list[np.ndarray]:
    """Each batch's cost per row in seconds: each step's frame time, plus a seek where a stream starts mid-item.
    From these, ``scaling_figures`` gives what 2 workers would gain if no producer ran ahead of the batch being
    assembled (lockstep: a batch takes at least its costliest row; not a bound on streamcli, whose producers run
    ahead), and ``windowed_figure`` what an ideal scheduler could gain with the loader's window."""
    per_batch = []
    for where in layout:  # (T, B): item per step, -1 padding, -2 - item for a mid-item start
        item = np.where(where <= -2, -2 - where, where)
        cost = np.where(item >= 0, frame_s[np.maximum(item, 0)], 0.0)
        cost += np.where(where <= -2, seek_s[np.maximum(item, 0)], 0.0)
        per_batch.append(cost.sum(axis=0))
    return per_batch


def timed(fn: Callable[[], int], repeats: int) -> tuple[float, int]:
    """Median frames/s over ``repeats`` passes, after one warm-up pass."""
    n = fn()
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        got = fn()
        rates.append(got / (time.perf_counter() - t))
        assert got == n, f"pass decoded {got} frames, warm-up {n}"
    return statistics.median(rates), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=B, help="B of the loader runs")
    ap.add_argument("--segment", type=int, default=SEGMENT, help="segment= of the loader runs (0: whole files)")
    ap.add_argument("--no-bare", action="store_true", help="skip the bare-loop and in-process rows")
    ap.add_argument("--no-camera", action="store_true", help="skip the camera rows")
    ap.add_argument("--threads", action="store_true", help="add a 2-worker row with 2 FFmpeg threads per worker")
    ap.add_argument("--prefetch", type=int, default=None, help="prefetch= of the scaling runs (default: the loader's)")
    ap.add_argument("--no-host", action="store_true",
                    help="skip the host's figure after each scaling round (2 plain decoders against 1)")  # fmt: skip
    ap.add_argument("--balance", choices=("auto", "on", "off", "measured"), default="auto",
                    help="balance= of the loader runs (auto: the video source's costly_steps, i.e. on; measured: "
                         "as for a plugin that does not set costly_steps, on once measured)")  # fmt: skip
    ap.add_argument("--folder", help="a folder of videos to run on (default: the project's real clips)")
    args = ap.parse_args()
    if args.folder is not None:
        use_folder(args.folder)
    default_threads = cv2.getNumThreads()
    balance = {"auto": None, "on": True, "off": False, "measured": None}[args.balance]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the two non-videos are skipped, as the tests check
        src = VideoSource(data_dir(), size=SIZE, scan=True)
    paths = clip_paths(src)
    rows: list[tuple[str, float, int, str]] = []

    def add(name: str, fn: Callable[[], int], ref: str = BARE) -> None:
        rate, n = timed(fn, args.repeats)
        base = next((r for (nm, r, _, _) in rows if nm == ref), rate)
        rows.append((name, rate, n, f"{rate / base:.2f}x {ref}"))
        print(f"{name:<75} {rate:8.0f} frames/s  {n} frames  {rate / base:.2f}x {ref}", flush=True)

    def run_loader(loader: StreamLoader, layouts: list[Any] | None = None) -> Callable[[], int]:
        return lambda: through_loader(loader, layouts)

    if not args.no_bare:
        add(BARE, lambda: bare(paths, False))
        cv2.setNumThreads(1)
        add("bare cv2 loop, setNumThreads(1) + N_THREADS=1", lambda: bare(paths, True))
        cv2.setNumThreads(default_threads)
        add("VideoSource.open, in-process, default threads", lambda: direct(src))

    def video(segment: int, threads: int = 0) -> VideoSource:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = VideoSource(data_dir(), size=SIZE, segment=segment, scan=True, threads=threads)
            out.items()
        if args.balance == "measured":
            out.costly_steps = False  # a plugin that does not say: the loader measures
        return out

    def loader_row(name: str, src: VideoSource, workers: int, ref: str) -> None:
        # shuffle (the default): each timed pass is a new epoch with its own stream order
        with StreamLoader(src, args.batch, T, num_workers=workers, seed=0, boundary="pack", balance=balance) as loader:
            add(f"{name} [{len(src.items())} streams]", run_loader(loader), ref)

    def scaling(name: str, src: VideoSource, cut: int, frame_s: np.ndarray, seek_s: np.ndarray,
                frames: np.ndarray) -> None:  # fmt: skip
        """1 worker against 2, their passes alternating, so that the host's drift (its speed moves by a third
        within minutes) hits both alike; the ratio is the median of the rounds' ratios. Both loaders live
        throughout: an idle worker naps, and both run the same epochs (a new shuffle each pass)."""
        kw: dict[str, Any] = dict(seed=0, boundary="pack", prefetch=args.prefetch, balance=balance)
        with StreamLoader(src, args.batch, T, num_workers=1, **kw) as one, \
                StreamLoader(src, args.batch, T, num_workers=2, **kw) as two:  # fmt: skip
            through_loader(one), through_loader(two)  # warm-up: worker start, page cache
            rates: tuple[list[float], list[float]] = ([], [])
            layouts: list[Any] = []
            host: list[float] = []  # per round: what two plain decoders gained over one, just after the passes
            busy: tuple[list[list[float]], list[list[float]]] = ([], [])  # per pass: each worker's busy seconds
            walls: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.repeats):
                for i, loader in enumerate((one, two)):
                    t, b0 = time.perf_counter(), loader.stats.worker_busy_s
                    n = through_loader(loader, layouts if loader is one else None)
                    walls[i].append(time.perf_counter() - t)
                    rates[i].append(n / walls[i][-1])
                    busy[i].append([b - a for a, b in zip(b0, loader.stats.worker_busy_s, strict=True)])
                if not args.no_host:
                    host.append(2 * decode_round(paths, HOST_FRAMES)[2])
            window = getattr(two, "window", getattr(two, "prefetch", 4))  # 4 before 2026-11-24, then prefetch
        ratio = statistics.median(b / a for a, b in zip(*rates, strict=True))
        label = f"[{len(src.items())} items]"
        for w, r in ((1, rates[0]), (2, rates[1])):
            rate = statistics.median(r)
            rows.append((f"StreamLoader, {w} worker{'s' * (w > 1)}, {name} {label}", rate, n, ""))
            print(f"{rows[-1][0]:<75} {rate:8.0f} frames/s  (rounds: {', '.join(f'{x:.0f}' for x in r)})", flush=True)
        rows.append(
            (
                f"2 workers / 1 worker, {name}, median of {args.repeats} alternating rounds",
                0.0,
                0,
                f"{ratio:.2f}x (rounds: {', '.join(f'{b / a:.2f}' for a, b in zip(*rates, strict=True))})",
            )
        )
        print(f"{rows[-1][0]:<75} {rows[-1][3]}", flush=True)
        # The ratio in two parts: how busy the scheduler kept both workers, and what the same frames cost a
        # worker when two decode at once (the host's part): 2w/1w ~ 2 x busy share / cost ratio.
        share2 = statistics.median(sum(b) / (2 * w) for b, w in zip(busy[1], walls[1], strict=True))
        cost = statistics.median(sum(b2) / sum(b1) for b1, b2 in zip(busy[0], busy[1], strict=True))
        rows.append((f"2 workers: their busy share of the passes' time, {name}", 0.0, 0, f"{share2:.0%}"))
        rows.append((f"worker-seconds for the epoch, 2 workers / 1 worker, {name}", 0.0, 0, f"{cost:.2f}x"))
        for row in rows[-2:]:
            print(f"{row[0]:<75} {row[3]}", flush=True)
        if host:
            share = [b / a / h for a, b, h in zip(*rates, host, strict=True)]
            each = ", ".join(f"{h:.2f}" for h in host)
            rows.append((f"host: 2 plain decoders / 1, {HOST_FRAMES} frames each, after each round", 0.0, 0,
                         f"{statistics.median(host):.2f}x (rounds: {each})"))  # fmt: skip
            each = ", ".join(f"{x:.0%}" for x in share)
            rows.append((f"2 workers / 1 worker as a share of the host's figure, {name}", 0.0, 0,
                         f"{statistics.median(share):.0%} (rounds: {each})"))  # fmt: skip
            for row in rows[-2:]:
                print(f"{row[0]:<75} {row[3]}", flush=True)
        epochs = [row_costs(lay, frame_s, seek_s) for lay in layouts]
        lockstep = statistics.median(scaling_figures(c)[0] for c in epochs)
        windowed = statistics.median(windowed_figure(c, window) for c in epochs)
        bound = stream_bound(frames, frame_s, seek_s, cut)
        for what, value in (("without run-ahead (lockstep)", lockstep),
                            (f"ideal scheduler, {window} batches ahead", windowed),
                            ("bound: costliest stream", bound)):  # fmt: skip
            rows.append((f"{what}, 2 workers, {name}", 0.0, 0, f"{value:.2f}x (measured: {ratio / value:.0%} of it)"))
            print(f"{rows[-1][0]:<75} {rows[-1][3]}", flush=True)

    whole, seg = video(0), video(args.segment)
    s = f"segment={args.segment}"
    if not args.no_bare:
        loader_row("StreamLoader, 0 workers (in-process), whole files", whole, 0, BARE)
        loader_row(f"StreamLoader, 0 workers (in-process), {s}", seg, 0, BARE)
    # The scaling target (issue 8): 2 workers against 1, whole files and segments, in alternating rounds. Next to
    # each, what 2 workers would gain without run-ahead, with the loader's window, and the most any loader could
    # (``stream_bound``), on the same epochs.
    frame_s, seek_s, frames = item_costs(args.segment)
    for (name, src_), cut in zip((("whole files", whole), (s, seg)), (0, args.segment), strict=True):
        scaling(name, src_, cut, frame_s, seek_s, frames)
    if args.threads:
        one = f"StreamLoader, 1 worker, {s} [{len(seg.items())} items]"
        loader_row(f"StreamLoader, 2 workers x threads=2 (FFmpeg), {s}", video(args.segment, threads=2), 2, one)

    cam = CameraSource(16, steps=256, size=SIZE)
    if not args.no_camera:
        add(CAM, lambda: direct(cam), CAM)
    for workers in () if args.no_camera else (0, 1, 2):
        with StreamLoader(cam, args.batch, T, num_workers=workers) as loader:
            add(f"camera StreamLoader, {workers} worker{'s' * (workers != 1)}", run_loader(loader), CAM)

    print()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, OpenCV {cv2.__version__}, "
          f"Python {platform.python_version()}, {len(paths)} clips, median of {args.repeats}")  # fmt: skip
    print("\n| run | frames/s | frames | ratio |\n|---|---:|---:|---|")
    for name, rate, n, ratio in rows:
        print(f"| {name} | {rate:.0f} | {n} | {ratio} |" if n else f"| {name} | | | {ratio} |")


if __name__ == "__main__":
    main()
