"""Benchmark: the camera source's integer warp against ``cv2.warpPerspective`` on the same poses.

    python benchmarks/bench_camera_render.py                 # sizes 64 and 128, 7 repeats; a Markdown table
    python benchmarks/bench_camera_render.py --repeats 3 --sizes 96

The camera renders each frame with ``streamcli_sources._warp`` (integer arithmetic: the same bytes on every CPU)
since issue 46 point 10; it rendered with OpenCV's bilinear ``warpPerspective`` (float32, CPU-dependent) before.
For each frame size this renders the same 100 frames of one stream both ways, interleaved within each repeat, with
OpenCV on one thread (as the camera's workers had it), and gives the median milliseconds per frame of each and
their ratio (the camera's time includes its poses and homographies, OpenCV's the warp alone, so the ratio is an
upper bound); "max diff" is the largest difference of a pixel between the two renderings.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Sequence

import cv2
import numpy as np
from streamcli_sources import _warp
from streamcli_sources.camera import CameraSource

STEPS = 100


def _poses(src: CameraSource) -> list[np.ndarray]:
    """Stream 1's poses (frame pixels -> plane pixels), as the integer warp takes them, in floats for OpenCV."""
    return [np.array(src.frame_to_plane(1, t), np.float64).reshape(3, 3) / (1 << _warp.SHIFT) for t in range(STEPS)]


def _opencv(hwc: np.ndarray, pose: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """A frame as the camera rendered it with OpenCV: bilinear, float, wrap border; (C, H, W)."""
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    out = cv2.warpPerspective(hwc, pose, size[::-1], flags=flags, borderMode=cv2.BORDER_WRAP)
    return np.asarray(out).transpose(2, 0, 1)


def measure(size: int, repeats: int) -> dict[str, float]:
    src = CameraSource(2, steps=STEPS, size=size)
    frames: list[np.ndarray] = [np.asarray(s["frame"]) for s in src.open(1)]  # warms the texture and the warp
    hwc = np.ascontiguousarray(src.plane()[..., ::-1])  # RGB, (H, W, 3)
    poses = _poses(src)
    pairs = zip(poses, frames, strict=True)
    diff = max(int(np.abs(_opencv(hwc, p, src.size).astype(int) - f.astype(int)).max()) for p, f in pairs)
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = sum(1 for _ in src.open(1))  # poses, homographies and frames
        ours.append((time.perf_counter() - t0) / n)
        t0 = time.perf_counter()
        for pose in poses:  # the frames alone: the poses are computed before
            _opencv(hwc, pose, src.size)
        theirs.append((time.perf_counter() - t0) / STEPS)
    a, b = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
    return {"integer": a, "opencv": b, "ratio": a / b if b else math.nan, "diff": diff}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)
    print("| frame | integer warp, ms/frame | cv2.warpPerspective, ms/frame | ratio | max diff |")
    print("|---|---|---|---|---|")
    for size in args.sizes:
        m = measure(size, args.repeats)
        print(f"| {size}x{size} | {m['integer']:.3f} | {m['opencv']:.3f} | {m['ratio']:.2f} | {m['diff']:.0f} |")


if __name__ == "__main__":
    main()
