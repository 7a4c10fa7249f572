"""The ANSI encoder: images as half-block lines, pre-built as strings with numpy.

Images are drawn with half-block characters (``▀``: foreground = upper pixel, background = lower pixel).
Building one Rich ``Style`` per cell is far too slow for a live stream,
so each terminal line is assembled as one pre-built ANSI string with numpy (fixed-width escape codes filled
in by table lookup) and emitted as a zero-width control segment. Rich cannot measure such lines, so the
grid computes its own widths (``fit_width``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from rich.cells import set_cell_size
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import ControlType, Segment

RESET = "\x1b[0m"
DIM = "\x1b[2m"
BOLD = "\x1b[1m"
REVERSE = "\x1b[7m"
_SPARK = "▁▂▃▄▅▆▇█"
_DIGITS = np.array([list(f"{i:03d}".encode()) for i in range(256)], dtype=np.uint8)  # zero-padded 000-255


def _cube256(img: np.ndarray) -> np.ndarray:
    """RGB -> xterm 256-colour cube index (16 + 36r + 6g + b), vectorised."""
    lvl = np.where(img < 48, 0, np.where(img < 115, 1, (img.astype(np.int16) - 35) // 40)).astype(np.int16)
    return (16 + 36 * lvl[..., 0] + 6 * lvl[..., 1] + lvl[..., 2]).astype(np.uint8)


def _template(parts: Sequence[bytes | int]) -> tuple[np.ndarray, list[int]]:
    """A fixed-width cell template and the offsets of its 3-digit slots (ints in ``parts``)."""
    buf, slots = bytearray(), []
    for p in parts:
        if isinstance(p, int):
            slots.append(len(buf))
            buf += b"000"
        else:
            buf += p
    return np.frombuffer(bytes(buf), dtype=np.uint8), slots


_TRUE_T = _template([b"\x1b[38;2;", 0, b";", 0, b";", 0, b";48;2;", 0, b";", 0, b";", 0, b"m", "▀".encode()])
_256_T = _template([b"\x1b[38;5;", 0, b";48;5;", 0, b"m", "▀".encode()])


def half_block_lines(img: np.ndarray, color_system: str = "truecolor") -> list[str]:
    """One ANSI string per terminal line for an RGB uint8 image (two pixel rows per line).

    ``color_system`` is ``"truecolor"`` (24-bit escapes) or ``"256"`` (xterm palette).
    """
    if img.shape[0] % 2:
        img = np.concatenate([img, np.zeros_like(img[:1])], axis=0)
    top, bot = img[0::2], img[1::2]
    if color_system == "truecolor":
        tmpl, slots = _TRUE_T
        values = [top[..., 0], top[..., 1], top[..., 2], bot[..., 0], bot[..., 1], bot[..., 2]]
    else:
        tmpl, slots = _256_T
        values = [_cube256(top), _cube256(bot)]
    rows, cols = top.shape[:2]
    out = np.empty((rows, cols, tmpl.size), dtype=np.uint8)
    out[:] = tmpl
    for off, v in zip(slots, values, strict=True):
        out[:, :, off : off + 3] = _DIGITS[v]
    return [out[r].tobytes().decode() + RESET for r in range(rows)]


def fit_width(s: str, width: int) -> str:
    """``s`` cropped or padded to exactly ``width`` terminal cells."""
    return set_cell_size(s, width)


def spark(values: np.ndarray, lo: float | None = None, hi: float | None = None) -> str:
    """A one-line sparkline of ``values`` scaled to [lo, hi] (their range if not given)."""
    if values.size == 0:
        return ""
    v = values.astype(np.float64)
    lo = float(v.min()) if lo is None else lo
    hi = float(v.max()) if hi is None else hi
    idx = np.zeros(v.shape, dtype=np.int64) if hi <= lo else ((v - lo) / (hi - lo) * 7.999).astype(np.int64)
    return "".join(_SPARK[i] for i in idx.clip(0, 7))


class AnsiLines:
    """Pre-built ANSI lines emitted as zero-width control segments (Rich can neither measure nor crop them)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield Segment(line, None, [(ControlType.CURSOR_FORWARD, 0)])
            yield Segment.line()
