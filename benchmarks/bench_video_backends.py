"""Benchmark: the video source's two decoders, OpenCV (the default) and PyAV (``backend="pyav"``), on the real clips.

    python benchmarks/bench_video_backends.py              # tests/data/video and the shared clips, 5 rounds
    python benchmarks/bench_video_backends.py --repeats 1  # smoke run
    python benchmarks/bench_video_backends.py --folder ~/clips

The clips are those both backends open (tests/data/video, and ../shared/data/video or $STREAMCLI_DATA/video where
present, or ``--folder``; a file in both folders counts once), each decoded with one decoder thread, as the source
does by default. Three measures:

- decode: every frame of every clip to BGR at its own size, each backend's own loop (``grab``/``retrieve``;
  ``demux``/``decode``/``reformat``): the decoders alone, in frames/s;
- source: every frame through ``VideoSource.open`` at 128x128 (resize, RGB, CHW): what a loader's worker does;
- seek: ``VideoSource.open(item, start=k)`` with a scan, until its first frame, for k at 1/4, 1/2 and 3/4 of each
  clip, in ms: OpenCV seeks by frame index and checks the frame against the scan, PyAV by timestamp to the
  keyframe before and decodes forward; both decode from the start where the check fails.

Each round runs both backends on every measure, in an order reversed every other round, after one untimed warm-up
round (page cache, scans). Figures are medians over the rounds; each ratio (PyAV / OpenCV) is the median of the
rounds' ratios, since this shared host's speed swings within seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import cv2

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from streamcli_sources import _decode
from streamcli_sources.video import VideoItem, VideoSource

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("opencv", "pyav")
SIZE = (128, 128)
SEEK_AT = (0.25, 0.5, 0.75)


def folders(folder: str | None) -> list[Path]:
    if folder:
        return [Path(folder).expanduser()]
    shared = Path(os.environ.get("STREAMCLI_DATA") or ROOT.parent / "shared" / "data") / "video"
    return [ROOT / "tests" / "data" / "video", *([shared] if shared.is_dir() else [])]


def sources(roots: list[Path], cache: str) -> dict[str, list[tuple[VideoSource, VideoItem]]]:
    """Per backend, (source, item) for every clip that both backends open, in the same order."""
    out: dict[str, dict[str, tuple[VideoSource, VideoItem]]] = {b: {} for b in BACKENDS}
    for root in roots:
        for backend in BACKENDS:
            src = VideoSource(root, size=SIZE, scan=True, cache_dir=cache, backend=backend)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # files one backend cannot use are left out below
                for item in src.items():
                    out[backend][item[0]] = (src, item)
    both, seen = [], set()
    for path in sorted(set(out["opencv"]) & set(out["pyav"])):
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        if digest not in seen:  # tests/data holds copies of some shared clips: each file counts once
            seen.add(digest)
            both.append(path)
    if not both:
        sys.exit(f"no clip that both backends open under {', '.join(map(str, roots))}")
    return {b: [out[b][p] for p in both] for b in BACKENDS}


def decode_opencv(path: str) -> int:
    cap = _decode.open_capture(path, threads=1)
    n = 0
    try:
        for _ in _decode.grab_frames(cap, 5):
            if _decode.retrieve(cap) is None:
                break
            n += 1
    finally:
        cap.release()
    return n


def decode_pyav(path: str) -> int:
    from streamcli_sources._decode_pyav import PyAVVideo

    n = 0
    with PyAVVideo(path, threads=1) as video:
        for frame in video.frames():
            if video.bgr(frame) is None:
                break
            n += 1
    return n


DECODE: dict[str, Callable[[str], int]] = {"opencv": decode_opencv, "pyav": decode_pyav}


def decode_rate(backend: str, clips: list[tuple[VideoSource, VideoItem]]) -> float:
    t0, frames = time.perf_counter(), 0
    for _, item in clips:
        frames += DECODE[backend](item[0])
    return frames / (time.perf_counter() - t0)


def source_rate(clips: list[tuple[VideoSource, VideoItem]]) -> float:
    t0, frames = time.perf_counter(), 0
    for src, item in clips:
        frames += sum(1 for _ in src.open(item))
    return frames / (time.perf_counter() - t0)


def seek_ms(clips: list[tuple[VideoSource, VideoItem]]) -> dict[str, float]:
    """Per clip, the median over ``SEEK_AT`` of the time to a resumed stream's first frame."""
    out = {}
    for src, item in clips:
        times = []
        for at in SEEK_AT:
            k = max(1, int(item[2] * at))
            t0 = time.perf_counter()
            it = iter(src.open(item, start=k))
            next(it)
            times.append((time.perf_counter() - t0) * 1000)
            del it  # closes the decoder
        out[item[0]] = statistics.median(times)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (after one warm-up round)")
    parser.add_argument("--folder", help="your own videos instead of the project's clips")
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)  # as the source's workers do
    with tempfile.TemporaryDirectory() as cache:
        clips = sources(folders(args.folder), cache)
        rates: dict[str, dict[str, list[float]]] = {m: {b: [] for b in BACKENDS} for m in ("decode", "source")}
        seeks: dict[str, list[dict[str, float]]] = {b: [] for b in BACKENDS}
        for rnd in range(args.repeats + 1):
            order = BACKENDS if rnd % 2 else BACKENDS[::-1]
            for backend in order:
                d, s, k = decode_rate(backend, clips[backend]), source_rate(clips[backend]), seek_ms(clips[backend])
                if rnd:  # round 0 warms the page cache and the decoders up
                    rates["decode"][backend].append(d)
                    rates["source"][backend].append(s)
                    seeks[backend].append(k)
    n = len(clips["opencv"])
    frames = sum(item[2] for _, item in clips["opencv"])
    print(f"# Video backends: {n} clips ({frames} frames), one decoder thread, {args.repeats} rounds")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print("| measure | OpenCV | PyAV | PyAV / OpenCV (median of rounds; range) |")
    print("|---|---|---|---|")
    for measure, what in (("decode", "decode to BGR, frames/s"), ("source", "VideoSource.open 128x128, frames/s")):
        cv, av = rates[measure]["opencv"], rates[measure]["pyav"]
        ratios = [a / c for a, c in zip(av, cv, strict=True)]
        print(
            f"| {what} | {statistics.median(cv):.0f} | {statistics.median(av):.0f} | "
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |"
        )
    per_round = {b: [statistics.median(r.values()) for r in seeks[b]] for b in BACKENDS}
    ratios = [a / c for a, c in zip(per_round["pyav"], per_round["opencv"], strict=True)]
    print(
        f"| seek to first frame, ms (median over clips) | {statistics.median(per_round['opencv']):.1f} | "
        f"{statistics.median(per_round['pyav']):.1f} | {statistics.median(ratios):.2f}x "
        f"({min(ratios):.2f}-{max(ratios):.2f}) |"
    )
    print("\n| clip | frames | seek OpenCV, ms | seek PyAV, ms |")
    print("|---|---|---|---|")
    for (_, item), _unused in zip(clips["opencv"], clips["pyav"], strict=True):
        cv_ms = statistics.median(r[item[0]] for r in seeks["opencv"])
        av_ms = statistics.median(r[item[0]] for r in seeks["pyav"])
        print(f"| {Path(item[0]).name} | {item[2]} | {cv_ms:.1f} | {av_ms:.1f} |")


if __name__ == "__main__":
    main()
