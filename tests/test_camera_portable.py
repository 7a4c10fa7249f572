"""The camera's frames are the same bytes on every CPU: integer arithmetic, checked against a reference in Python ints.

OpenCV's ``warpPerspective`` gave other pixels on an AMD EPYC host (AVX2) than on the Intel host (AVX-512) that
recorded the golden hashes: its float32 kernels take fused multiply-adds and vector widths from the CPU. The hashes
pinned here come from Python-int reference code that no SIMD path touches, so they hold on any host.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import math
import random
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import pytest
from streamcli_sources import _portable_math as pm
from streamcli_sources._warp import Plane, fixed, to_gray, warp
from streamcli_sources.camera import CameraSource


def _reflect(i: int, n: int) -> int:
    if n == 1:
        return 0
    period = 2 * n - 2
    i %= period
    return period - i if i >= n else i


def reference_warp(plane: np.ndarray, h: Sequence[int], size: tuple[int, int], border: str) -> np.ndarray:
    """``_warp.warp``'s rule, one pixel at a time in Python ints (its module docstring states it)."""
    channels, n_rows, n_cols = plane.shape
    rows, cols = size
    out = np.zeros((channels, rows, cols), np.uint8)
    edge = (lambda i, n: i % n) if border == "wrap" else _reflect
    for y in range(rows):
        for x in range(cols):
            den = h[6] * x + h[7] * y + h[8]
            u = (64 * (h[0] * x + h[1] * y + h[2]) + den) // (2 * den)
            v = (64 * (h[3] * x + h[4] * y + h[5]) + den) // (2 * den)
            x0, y0, ax, ay = u // 32, v // 32, u % 32, v % 32
            xa, xb = edge(x0, n_cols), edge(x0 + 1, n_cols)
            ya, yb = edge(y0, n_rows), edge(y0 + 1, n_rows)
            for c in range(channels):
                p = [[int(plane[c, yy, xx]) for xx in (xa, xb)] for yy in (ya, yb)]
                acc = p[0][0] * (32 - ax) * (32 - ay) + p[0][1] * ax * (32 - ay)
                acc += p[1][0] * (32 - ax) * ay + p[1][1] * ax * ay
                out[c, y, x] = (acc + 512) >> 10
    return out


@pytest.mark.parametrize("border", ["wrap", "reflect"])
def test_the_integer_warp_equals_a_pixel_by_pixel_reference_in_python_ints(border: str) -> None:
    rng = np.random.default_rng(4)
    plane = rng.integers(0, 256, (3, 23, 31), dtype=np.uint8)
    for k in range(6):
        angle, zoom = 0.4 * k - 1.0, 0.6 + 0.3 * k
        c, s = math.cos(angle) * zoom, math.sin(angle) * zoom
        # Positions well outside the plane on both sides, and a perspective row, so both borders are crossed.
        h = (c, -s, -40.0 + 17 * k, s, c, 35.0 - 13 * k, 0.002 * k, -0.003, 1.0)
        got = warp(Plane(plane), fixed(h), (9, 13), border)
        np.testing.assert_array_equal(got, reference_warp(plane, fixed(h), (9, 13), border))


def test_grey_is_rec601_luma_rounded_in_integers() -> None:
    rgb = np.random.default_rng(1).integers(0, 256, (3, 17, 19), dtype=np.uint8)
    c = rgb.astype(np.int64)
    want = (4899 * c[0] + 9617 * c[1] + 1868 * c[2] + 8192) // 16384  # 0.299, 0.587, 0.114 in 14 bits
    np.testing.assert_array_equal(to_gray(rgb)[0], want)
    luma = 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]
    assert np.abs(to_gray(rgb)[0] - luma).max() <= 0.51


def test_portable_sine_and_exponential_are_within_a_few_ulps_of_libm() -> None:
    r = random.Random(3)
    for x in [r.uniform(-200.0, 200.0) for _ in range(2000)]:
        assert abs(pm.sin(x) - math.sin(x)) < 1e-13 and abs(pm.cos(x) - math.cos(x)) < 1e-13
    for x in [r.uniform(-3.0, 3.0) for _ in range(2000)]:
        assert abs(pm.exp(x) / math.exp(x) - 1.0) < 1e-14
    m = (1.5, -0.2, 30.0, 0.3, 1.4, -7.0, 0.001, -0.002, 1.1)
    np.testing.assert_allclose(np.reshape(pm.mul(pm.inverse(m), m), (3, 3)), np.eye(3), atol=1e-12)


def _digest(src: CameraSource, item: int) -> str:
    h = hashlib.sha256()
    for step in src.open(item):
        h.update(step["frame"].tobytes())
        h.update(step["homography"].tobytes())
    return h.hexdigest()[:16]


def test_the_camera_calls_no_opencv_pixel_math(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kw: object) -> None:
        raise AssertionError("the camera called OpenCV's float pixel math")

    for name in ("warpPerspective", "warpAffine", "remap", "resize", "cvtColor"):
        monkeypatch.setattr(cv2, name, refuse)
    steps = list(CameraSource(2, steps=3, size=(12, 16)).open(1))
    assert len(steps) == 3 and steps[2]["frame"].shape == (3, 12, 16)


def _plane_png(tmp_path: Path) -> Path:
    img = np.random.default_rng(7).integers(0, 256, (40, 56, 3), dtype=np.uint8)
    path = tmp_path / "plane.png"
    cv2.imwrite(str(path), img)  # PNG is lossless: the plane is these bytes
    return path


def test_camera_frames_are_the_reference_warp_of_the_plane_and_their_hash_is_pinned(tmp_path: Path) -> None:
    """Frames against the Python-int reference (each step's pose rebuilt from the stream's homographies), and the
    hashes of three configurations, the same on any host: a change of them is a change of every camera stream."""
    image = str(_plane_png(tmp_path))
    pinned = {
        "texture": (CameraSource(2, steps=6, size=(10, 14), seed=2), "adbd3ebd30edaeca"),
        "gray": (CameraSource(2, steps=6, size=(10, 14), seed=2, gray=True), "3802138e7f40df19"),
        "image": (CameraSource(2, steps=6, size=(10, 14), image=image, view=0.5), "d842fc12a39d2d8f"),
    }
    texture = importlib.resources.files("streamcli_sources").joinpath("texture.png").read_bytes()
    for src, _ in pinned.values():
        data = Path(src.image).read_bytes() if src.image else texture
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)  # PNG: lossless, no float math
        rgb = np.ascontiguousarray(bgr[..., ::-1].transpose(2, 0, 1))
        plane = to_gray(rgb) if src.gray else rgb
        border = "reflect" if src.image else "wrap"
        for t, step in enumerate(src.open(1)):
            want = reference_warp(plane, src.frame_to_plane(1, t), src.size, border)
            np.testing.assert_array_equal(step["frame"], want)
    got = {name: _digest(src, 1) for name, (src, _) in pinned.items()}
    assert got == {name: want for name, (_, want) in pinned.items()}


_HASH_SCRIPT = """
import hashlib, sys
import cv2
import numpy as np
from streamcli_sources.camera import CameraSource

h = hashlib.sha256()
for size in (8, 13, 64):
    src = CameraSource(3, steps=11, size=size, seed=2)
    for item in range(3):
        for step in src.open(item):
            h.update(step["frame"].tobytes())
            h.update(step["homography"].tobytes())
# What the camera did before: OpenCV's float warp of the same plane through the same poses.
cv = hashlib.sha256()
src = CameraSource(3, steps=11, size=13, seed=2)
for item in range(3):
    for t in range(11):
        pose = np.array(src.frame_to_plane(item, t), np.float64).reshape(3, 3) / (1 << 24)
        flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
        cv.update(cv2.warpPerspective(src.plane(), pose, (13, 13), flags=flags, borderMode=cv2.BORDER_WRAP).tobytes())
print(h.hexdigest(), cv.hexdigest())
"""
# OpenCV's dispatched x86 paths above its SSE baseline, and every path numpy dispatches to (X86_V3: AVX2 and FMA).
_OPENCV_SIMD = "SSE4_1,SSE4_2,POPCNT,AVX,FP16,AVX2,FMA3,AVX512_SKX,AVX512_CLX,AVX_VNNI"


@pytest.mark.slow
def test_the_camera_gives_the_same_bytes_with_the_cpus_simd_paths_turned_off() -> None:
    """A host without AVX2 or FMA, made on this one: OpenCV and numpy run their baseline code. The camera's bytes do
    not move; OpenCV's float warp, which the camera used before, does on a host with FMA (an AMD EPYC's AVX2 path
    gave other pixels than an Intel's AVX-512 path, which is how this was found)."""
    import os
    import subprocess
    import sys

    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    base = {k: v for k, v in os.environ.items() if k not in ("OPENCV_CPU_DISABLE", "NPY_DISABLE_CPU_FEATURES")}
    envs = {
        "as the CPU allows": base,
        "OpenCV without SIMD": {**base, "OPENCV_CPU_DISABLE": _OPENCV_SIMD},
        "numpy without SIMD": {**base, "NPY_DISABLE_CPU_FEATURES": " ".join(__cpu_dispatch__)},
    }
    got = {}
    for name, env in envs.items():
        run = subprocess.run([sys.executable, "-c", _HASH_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        got[name] = run.stdout.split()
    ours = {name: h[0] for name, h in got.items()}
    assert len(set(ours.values())) == 1, ours
    if __cpu_features__.get("FMA3") and __cpu_features__.get("AVX2"):
        assert got["as the CPU allows"][1] != got["OpenCV without SIMD"][1]  # the check can see a SIMD dependence
