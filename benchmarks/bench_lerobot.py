"""Benchmark: the ``lerobot`` source against a plain loop that decodes each episode's frames with the same backend.

    python benchmarks/bench_lerobot.py                 # 7 interleaved rounds; prints a Markdown table
    python benchmarks/bench_lerobot.py --rounds 1      # smoke run

A LeRobot v3.0 dataset is written once to a temporary folder from the real clips (``../shared/data/video``): 24
episodes of 40-120 frames at 96x128, 30 fps, encoded as LeRobot encodes them (``libsvtav1``, ``g=2``, ``crf=30``),
four episodes per data file and per video file. Both sides decode every frame of every episode at its row's time
with PyAV (one decoder thread) and read the episode's rows with pyarrow:

- the plain loop, per episode: ``read_row_group``, ``av.open``, seek to the episode's ``from_timestamp``, decode
  forward, RGB and HWC->CHW for each frame of the episode (what a hand-written reader does), converting with one
  ``VideoReformatter`` per file as the source does (the baseline of the ratios), and, as a second row, with
  ``frame.to_ndarray("rgb24")``, which makes a converter per frame;
- ``StreamLoader(load_source("lerobot", ...), B=8, T=32)`` in-process (``num_workers=0``), and with 2 workers,
  each made once (as a training run makes it) and warmed up by one epoch.

Each round runs each loop once and one epoch of each loader; rounds alternate the order. Reported: each side's
median frames/s over the rounds, and the median of the rounds' ratios to the loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
from av.video.reformatter import VideoReformatter

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.lerobot_data import CAMERA, Episode, clip_frames, write_v30
from benchmarks.videos import data_dir
from streamcli import StreamLoader, load_source

FPS = 30
HW = (96, 128)
CLIPS = ("bikes.mp4", "cockatoo.mp4", "carphone_pristine.mp4", "balle-jbart.mp4")
B, T = 8, 32
LOOP = "plain PyAV loop (one reformatter per file)"


def build(root: Path, episodes: int, codec: str) -> int:
    """The benchmark's dataset at ``root``; returns its number of frames."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(40, 121, episodes).tolist()
    eps = []
    for e, n in enumerate(lengths):
        frames = clip_frames(data_dir() / CLIPS[e % len(CLIPS)], n, HW, skip=int(rng.integers(0, 60)))
        state = rng.standard_normal((n, 6)).astype(np.float32)
        eps.append(Episode(frames, state, state, e % 2))
    write_v30(root, eps, FPS, per_file=4, codec=codec)
    return int(sum(lengths))


def plain_loop(root: Path, reuse: bool = True) -> int:
    """Every episode's rows and frames, decoded along the episode with PyAV: the frames decoded. ``reuse`` converts
    frames with one ``VideoReformatter`` per file (as the source does); else ``to_ndarray`` makes one per frame."""
    episodes = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    done = 0
    files: dict[int, pq.ParquetFile] = {}
    first_row: dict[int, int] = {}
    for ep in episodes:
        f = int(ep["data/file_index"])
        if f not in files:
            files[f] = pq.ParquetFile(root / f"data/chunk-000/file-{f:03d}.parquet")
            first_row[f] = 0
        rows = files[f].read_row_group(first_row[f])  # one row group per episode
        first_row[f] += 1
        times = rows.column("timestamp").to_numpy().astype(np.float64) + ep[f"videos/{CAMERA}/from_timestamp"]
        state = rows.column("observation.state").combine_chunks().flatten().to_numpy().reshape(len(times), 6)
        path = root / f"videos/{CAMERA}/chunk-000/file-{int(ep[f'videos/{CAMERA}/file_index']):03d}.mp4"
        reformatter = VideoReformatter()
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            s.codec_context.thread_count = 1
            c.seek(int(times[0] / s.time_base), stream=s, backward=True)
            k = 0
            for frame in c.decode(s):
                if frame.time < times[k] - 0.5 / FPS:
                    continue
                rgb = reformatter.reformat(frame, format="rgb24") if reuse else frame
                chw = np.ascontiguousarray(rgb.to_ndarray(format="rgb24").transpose(2, 0, 1))
                assert chw.shape == (3, *HW) and state[k].shape == (6,)
                k += 1
                done += 1
                if k == len(times):
                    break
    return done


def loader_epoch(loader: StreamLoader) -> int:
    """One epoch of an open loader: the frames delivered (padding left out)."""
    return sum(int(batch.valid.sum()) for batch in loader)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--episodes", type=int, default=24)
    ap.add_argument("--codec", default="libsvtav1", help="libsvtav1 (LeRobot's default) or libx264")
    ap.add_argument("--no-workers", action="store_true", help="only the in-process loader")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp) / "ds"
        frames = build(root, args.episodes, args.codec)
        sides: dict[str, Callable[[], int]] = {
            LOOP: lambda: plain_loop(root),
            "plain PyAV loop, to_ndarray per frame": lambda: plain_loop(root, reuse=False),
        }
        for workers in (0,) if args.no_workers else (0, 2):
            # made once, as in training: each round times one more epoch of it (start-up is not in the figure)
            loader = stack.enter_context(StreamLoader(load_source("lerobot", str(root)), B, T, num_workers=workers))
            name = "lerobot, in-process" if workers == 0 else f"lerobot, {workers} workers"
            sides[name] = lambda loader=loader: loader_epoch(loader)  # type: ignore[misc]
        for run in sides.values():
            run()  # warm-up: page cache, imports, worker start-up paths
        rates: dict[str, list[float]] = {name: [] for name in sides}
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                t0 = time.perf_counter()
                got = sides[name]()
                rates[name].append(got / (time.perf_counter() - t0))
                if got != frames:
                    sys.exit(f"{name} delivered {got} frames of {frames}")
        base = rates[LOOP]
        print(f"{args.episodes} episodes, {frames} frames {HW[0]}x{HW[1]} ({args.codec}), {args.rounds} rounds\n")
        print("| side | frames/s (median) | ratio to the loop (median of rounds) |")
        print("|---|---:|---:|")
        for name, rs in rates.items():
            ratio = statistics.median(a / b for a, b in zip(rs, base, strict=True))
            print(f"| {name} | {statistics.median(rs):.0f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
