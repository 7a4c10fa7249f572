"""The real clips the video benchmarks decode, and the plain decoding loop they are measured against.

``bench_video`` times the loader next to ``bare``; ``bench_host --variant video`` times ``bare`` in one process
against two at once (``decode_round``), the host's ceiling for the loader's scaling on video.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
import warnings
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import cv2
import numpy as np
from streamcli_sources.video import VideoSource

SIZE = (128, 128)

_folder: Path | None = None  # ``--folder`` (``use_folder``)


def data_dir() -> Path:
    """The clips' folder: ``--folder``, else $STREAMCLI_DATA/video, else ../shared/data/video beside the repo."""
    if _folder is not None:
        return _folder
    root = Path(os.environ.get("STREAMCLI_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    if not (root / "video").is_dir():
        sys.exit(f"real clips not found at {root / 'video'}; check out shared/ beside the repo or set STREAMCLI_DATA")
    return root / "video"


def use_folder(folder: str) -> None:
    """Run every row on the videos of ``folder`` (``--folder``): your own clips, not the project's. Exits with a
    one-line error if it holds none that OpenCV can open."""
    global _folder
    _folder = Path(folder).expanduser()
    try:
        paths = clip_paths()
    except ValueError as exc:
        sys.exit(f"--folder {folder}: {exc}")
    if not paths:
        sys.exit(f"--folder {folder}: none of its videos can be decoded by OpenCV; pass a folder of video files")


def bare(paths: list[str], single_thread: bool, limit: int | None = None) -> int:
    """The loop anyone would write: read, resize, convert; no loader. Stops after ``limit`` frames if given."""
    params = [cv2.CAP_PROP_N_THREADS, 1] if single_thread else []
    n = 0
    for path in paths:
        cap = cv2.VideoCapture(path, cv2.CAP_FFMPEG, params)
        while limit is None or n < limit:
            ok, bgr = cap.read()
            if not ok:
                break
            small = cv2.resize(bgr, (SIZE[1], SIZE[0]), interpolation=cv2.INTER_LINEAR)
            np.ascontiguousarray(cv2.cvtColor(small, cv2.COLOR_BGR2RGB).transpose(2, 0, 1))
            n += 1
        cap.release()
    return n


def clip_paths(src: VideoSource | None = None) -> list[str]:
    """The usable clips of ``src`` (default: a scan of ``data_dir()``), as ``VideoSource`` finds them (the two
    non-videos are skipped, as the tests check)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = src if src is not None else VideoSource(data_dir(), size=SIZE, scan=True)
        return [item[0] for item in src.items()]


def _decode_child(paths: list[str], frames: int | None, barrier: Barrier, res: Queue[tuple[int, float]]) -> None:
    cv2.setNumThreads(1)  # as a loader's worker decodes: one FFmpeg thread
    barrier.wait()
    t0 = time.perf_counter()
    n = bare(paths, True, frames)
    res.put((n, time.perf_counter() - t0))


def decode_round(paths: list[str], frames: int | None = None) -> tuple[float, float, float]:
    """One round of the host's ceiling for video decoding: one process decodes ``frames`` frames of ``paths``
    (every frame if None) as ``bare`` does, then two processes decode the same each, at once.
    Returns (1-process seconds, the slower 2-process seconds, 2-proc / (2 x 1-proc)): each process does the whole
    work, so the ratio is the 1-process time over the slower 2-process time."""
    secs = []
    for procs in (1, 2):
        ctx = mp.get_context("spawn")
        barrier, res = ctx.Barrier(procs), ctx.Queue()
        ps = [ctx.Process(target=_decode_child, args=(paths, frames, barrier, res)) for _ in range(procs)]
        for p in ps:
            p.start()
        got = [res.get(timeout=300) for _ in range(procs)]
        for p in ps:
            p.join()
            if p.exitcode:
                raise RuntimeError(f"decoder exited with {p.exitcode}")
        secs.append(max(s for _, s in got))
    return secs[0], secs[1], secs[0] / secs[1]
