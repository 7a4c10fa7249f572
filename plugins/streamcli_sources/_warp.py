"""A bilinear perspective warp in integer arithmetic: the same pixels on every CPU.

OpenCV's ``warpPerspective`` maps coordinates and blends pixels in float32 with fused multiply-adds whose use
depends on the SIMD path the CPU dispatches to (and on the vector width, which decides which pixels of a row go
through the vector loop and which through the scalar tail), so its frames differ in a few pixels between an AVX2
and an AVX-512 host. Here the homography is rounded once to integers (``fixed``), each pixel's source position is
an integer division to 1/32 pixel, and the four neighbours are blended with integer weights: numpy's integer
operations are exact whatever instructions carry them.

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


def _border(i: npt.NDArray[np.int64], n: int, mode: str) -> npt.NDArray[np.int64]:
    if mode == "wrap" or n == 1:
        return np.mod(i, n)
    period = 2 * n - 2  # reflect-101: ... 2 1 | 0 1 2 ... n-1 | n-2 ...
    i = np.mod(i, period)
    return np.where(i >= n, period - i, i)


def warp(
    plane: npt.NDArray[np.uint8], h: Sequence[int], size: tuple[int, int], border: str = "wrap"
) -> npt.NDArray[np.uint8]:
    """``plane`` (C, H, W) seen through ``h`` (``fixed``: output pixel -> plane position) as ``size``: (C, h, w)."""
    rows, cols = size
    y, x = np.mgrid[0:rows, 0:cols].reshape(2, -1).astype(np.int64)
    den = h[6] * x + h[7] * y + h[8]
    if (den <= 0).any():
        raise ValueError("the homography maps part of the frame behind the camera (its w is not positive)")
    # round(ONE * num / den), in integers: floor((2 * ONE * num + den) / (2 * den)).
    u = (2 * _ONE * (h[0] * x + h[1] * y + h[2]) + den) // (2 * den)
    v = (2 * _ONE * (h[3] * x + h[4] * y + h[5]) + den) // (2 * den)
    ax, ay = (u & (_ONE - 1)).astype(np.int32), (v & (_ONE - 1)).astype(np.int32)
    x0, y0 = u >> _BITS, v >> _BITS
    n_rows, n_cols = plane.shape[1:]
    xs = _border(x0, n_cols, border), _border(x0 + 1, n_cols, border)
    rows0, rows1 = _border(y0, n_rows, border) * n_cols, _border(y0 + 1, n_rows, border) * n_cols
    corners = (rows0 + xs[0], rows0 + xs[1], rows1 + xs[0], rows1 + xs[1])
    weights = ((_ONE - ax) * (_ONE - ay), ax * (_ONE - ay), (_ONE - ax) * ay, ax * ay)
    out = np.empty((plane.shape[0], rows * cols), np.uint8)
    for c, channel in enumerate(plane.reshape(plane.shape[0], -1)):  # one 1-D gather per channel and corner: fast
        acc = np.full(rows * cols, 1 << (2 * _BITS - 1), np.int32)  # at most 255 << 10: fits
        for at, weight in zip(corners, weights, strict=True):
            acc += np.take(channel, at).astype(np.int32) * weight
        out[c] = acc >> (2 * _BITS)
    return out.reshape(-1, rows, cols)


def to_gray(rgb: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """RGB (3, H, W) to grey (1, H, W) with OpenCV's integer weights (Rec. 601, 14 fraction bits)."""
    c = rgb.astype(np.int32)
    grey = (c[0] * 4899 + c[1] * 9617 + c[2] * 1868 + (1 << 13)) >> 14
    out: npt.NDArray[np.uint8] = grey.astype(np.uint8)[None]
    return out
