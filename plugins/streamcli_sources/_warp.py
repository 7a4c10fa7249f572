"""A bilinear perspective warp in integer arithmetic: the same pixels on every CPU.

OpenCV's ``warpPerspective`` maps coordinates and blends pixels in float32 with fused multiply-adds whose use
depends on the SIMD path the CPU dispatches to (and on the vector width, which decides which pixels of a row go
through the vector loop and which through the scalar tail), so its frames differ in a few pixels between an AVX2
and an AVX-512 host. Here the homography is rounded once to integers (``fixed``), each pixel's source position is
an integer division to 1/32 pixel, and the four neighbours are blended with integer weights: numpy's integer
operations are exact whatever instructions carry them. The channels of a pixel travel packed in one uint64
(``Plane``), which blends them in one pass and changes no bit: each 21-bit lane holds at most 255 x 1024 + 512.

The rule, per output pixel (x, y), with H = ``fixed(...)`` (entries times 2**SHIFT):
``u = round(32 (H0 x + H1 y + H2) / (H6 x + H7 y + H8))`` (and ``v`` with H3, H4, H5), ``x0 = u >> 5``,
``ax = u & 31`` (and ``y0``, ``ay``), and the pixel is
``(p[y0,x0] (32-ax)(32-ay) + p[y0,x0+1] ax (32-ay) + p[y0+1,x0] (32-ax) ay + p[y0+1,x0+1] ax ay + 512) >> 10``,
with indices outside the plane wrapped (``wrap``) or reflected without repeating the edge (``reflect``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

SHIFT = 24  # fraction bits of the fixed-point homography
_BITS = 5  # fraction bits of a source position: 1/32 pixel, as OpenCV's INTER_BITS
_ONE = 1 << _BITS


def fixed(h: Sequence[float]) -> tuple[int, ...]:
    """A 3x3 homography (row by row) in fixed point: each entry times ``2**SHIFT``, rounded (exact in doubles)."""
    return tuple(round(v * (1 << SHIFT)) for v in h)


_LANE = 21  # bits per channel in a packed pixel: 255 x 1024 (all four weights) + 512 < 2**21, so lanes never carry


class Plane:
    """A (C, H, W) uint8 image (C <= 3) prepared for ``warp``: each pixel's channels packed into one uint64, 21 bits
    apart, so one gather and one multiply-add per corner blend every channel at once, exactly."""

    def __init__(self, chw: npt.NDArray[np.uint8]) -> None:
        if chw.ndim != 3 or not 1 <= chw.shape[0] <= 3:
            raise ValueError(f"a plane is (C, H, W) with 1 to 3 channels, not {chw.shape}")
        self.channels, self.rows, self.cols = chw.shape
        packed = np.zeros(self.rows * self.cols, np.uint64)
        for c, channel in enumerate(chw.reshape(self.channels, -1)):
            packed |= channel.astype(np.uint64) << np.uint64(_LANE * c)
        self.packed = packed


def _affine(a: int, b: int, c: int, rows: int, cols: int) -> npt.NDArray[np.int64]:
    """``a x + b y + c`` at every output pixel, flat: a row term plus a column term (one full-size pass)."""
    across = a * np.arange(cols, dtype=np.int64)
    down = b * np.arange(rows, dtype=np.int64) + c
    out: npt.NDArray[np.int64] = (down[:, None] + across[None, :]).reshape(-1)
    return out


def _pair(i: npt.NDArray[np.int64], n: int, mode: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Indices ``i`` and ``i + 1`` brought inside ``[0, n)``: wrapped, or reflected without repeating the edge."""
    if mode == "wrap" or n == 1:
        first = i & (n - 1) if n & (n - 1) == 0 else np.mod(i, n)  # a power of two (the built-in texture): a mask
        return first, np.where(first == n - 1, 0, first + 1)
    period = 2 * n - 2  # reflect-101: ... 2 1 | 0 1 2 ... n-1 | n-2 ...
    out = []
    for j in (i, i + 1):
        j = np.mod(j, period)
        out.append(np.where(j >= n, period - j, j))
    return out[0], out[1]


def warp(plane: Plane, h: Sequence[int], size: tuple[int, int], border: str = "wrap") -> npt.NDArray[np.uint8]:
    """``plane`` seen through ``h`` (``fixed``: output pixel -> plane position) as ``size``: (C, h, w) uint8."""
    rows, cols = size
    den = _affine(h[6], h[7], h[8], rows, cols)
    if (den <= 0).any():
        raise ValueError("the homography maps part of the frame behind the camera (its w is not positive)")
    # round(ONE * num / den), in integers: floor((2 * ONE * num + den) / (2 * den)).
    den2 = 2 * den
    u = (_affine(2 * _ONE * h[0], 2 * _ONE * h[1], 2 * _ONE * h[2], rows, cols) + den) // den2
    v = (_affine(2 * _ONE * h[3], 2 * _ONE * h[4], 2 * _ONE * h[5], rows, cols) + den) // den2
    ax, ay = (u & (_ONE - 1)).astype(np.uint64), (v & (_ONE - 1)).astype(np.uint64)
    x0, x1 = _pair(u >> _BITS, plane.cols, border)
    y0, y1 = _pair(v >> _BITS, plane.rows, border)
    y0, y1 = y0 * plane.cols, y1 * plane.cols
    one = np.uint64(_ONE)
    p = plane.packed
    acc = np.take(p, y0 + x0) * ((one - ax) * (one - ay))
    acc += np.take(p, y0 + x1) * (ax * (one - ay))
    acc += np.take(p, y1 + x0) * ((one - ax) * ay)
    acc += np.take(p, y1 + x1) * (ax * ay)
    acc += np.uint64(sum(1 << (2 * _BITS - 1 + _LANE * c) for c in range(plane.channels)))  # round each lane
    lane = np.uint64((1 << _LANE) - 1)
    out = np.empty((plane.channels, rows * cols), np.uint8)
    for c in range(plane.channels):
        out[c] = ((acc >> np.uint64(_LANE * c)) & lane) >> np.uint64(2 * _BITS)
    return out.reshape(-1, rows, cols)


def to_gray(rgb: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """RGB (3, H, W) to grey (1, H, W) with OpenCV's integer weights (Rec. 601, 14 fraction bits)."""
    c = rgb.astype(np.int32)
    grey = (c[0] * 4899 + c[1] * 9617 + c[2] * 1868 + (1 << 13)) >> 14
    out: npt.NDArray[np.uint8] = grey.astype(np.uint8)[None]
    return out
