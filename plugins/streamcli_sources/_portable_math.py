"""Sine, cosine, exponential and 3x3 matrix algebra that give the same bits on every CPU.

Only IEEE-754 double additions, multiplications and divisions, one at a time, in Python floats: each is correctly
rounded, and CPython never fuses two of them into an FMA. ``math.sin``, ``np.sin`` (SVML on AVX-512 hosts), a
``@`` that goes to BLAS and ``np.linalg.solve`` (LAPACK) pick their kernels by CPU, so their last bits differ
between hosts; the camera source's trajectories and homographies are built from these functions instead.
Accuracy is a few ulps, far more than a synthetic camera path needs; what matters is that it is the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

Mat3 = tuple[float, float, float, float, float, float, float, float, float]
"""A 3x3 matrix, row by row."""

_PI = 3.141592653589793
_TWO_PI = 6.283185307179586
_LN2 = 0.6931471805599453
_SIN_TERMS = 12  # of sin's Taylor series on [-pi/2, pi/2]: the next would be below 1e-20
_EXP_TERMS = 16  # of exp's on [-ln2/2, ln2/2]: the next would be below 1e-20


def sin(x: float) -> float:
    """``sin(x)``: reduced to [-pi/2, pi/2] (by a period, then ``sin(pi - r) = sin(r)``), then its Taylor series
    summed from the small terms up."""
    r = x - round(x / _TWO_PI) * _TWO_PI
    if r > _PI / 2:
        r = _PI - r
    elif r < -_PI / 2:
        r = -_PI - r
    r2 = r * r
    acc = 0.0
    for n in range(_SIN_TERMS, 0, -1):  # Horner: 1 - r^2/(2*3) (1 - r^2/(4*5) (...))
        acc = 1.0 - acc * r2 / ((2 * n) * (2 * n + 1))
    return r * acc


def cos(x: float) -> float:
    return sin(x + _TWO_PI / 4)


def exp(x: float) -> float:
    """``exp(x)``: ``2**k * exp(r)`` with ``|r| <= ln 2 / 2``, its Taylor series summed from the small terms up."""
    k = round(x / _LN2)
    r = x - k * _LN2
    acc = 1.0
    for n in range(_EXP_TERMS, 0, -1):
        acc = 1.0 + acc * r / n
    return acc * 2.0**k


def mul(a: Sequence[float], b: Sequence[float]) -> Mat3:
    """``a @ b``, each entry summed left to right."""
    out = [a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j] for i in range(3) for j in range(3)]
    return (out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8])


def inverse(m: Sequence[float]) -> Mat3:
    """``m``'s inverse by its adjugate (the camera's poses are far from singular)."""
    a, b, c, d, e, f, g, h, i = m
    co = (e * i - f * h, c * h - b * i, b * f - c * e, f * g - d * i, a * i - c * g, c * d - a * f)
    co2 = (d * h - e * g, b * g - a * h, a * e - b * d)
    det = a * co[0] + b * co[3] + c * co2[0]
    return (
        co[0] / det,
        co[1] / det,
        co[2] / det,
        co[3] / det,
        co[4] / det,
        co[5] / det,
        co2[0] / det,
        co2[1] / det,
        co2[2] / det,
    )
