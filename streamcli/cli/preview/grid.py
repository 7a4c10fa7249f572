"""The grid layout: one cell per batch row (image, text, audio strips, numbers), cells side by side."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from streamcli.cli.preview.ansi import BOLD, DIM, RESET, REVERSE, fit_width, half_block_lines
from streamcli.cli.preview.fields import (
    as_rgb,
    field_kind,
    printable,
    resize_nearest,
    series_lines,
    summary_line,
    wave_lines,
)
from streamcli.cli.preview.frame import Frame, RowView


@dataclass
class CellLayout:
    width: int
    image_height: int  # pixel rows (two per line)
    text_lines: int = 3


def kind_of(row: RowView, name: str) -> str:
    return row.kinds.get(name) or field_kind(row.step[name])


def shown_image(row: RowView) -> str | None:
    """The field drawn as the cell's picture: the first image field."""
    return next((k for k in row.step if kind_of(row, k) == "image"), None)


def cell_lines(row: RowView, lay: CellLayout, color_system: str) -> list[str]:
    """The cell of one row as exactly-``lay.width``-wide ANSI lines."""
    w = lay.width
    dim = not row.valid
    head = fit_width(row.label(w - 2), w - 2)
    mark = f"{REVERSE}{BOLD}↺{RESET}" if row.reset else " "
    style = DIM if dim else BOLD
    lines = [f"{mark} {style}{head}{RESET}"]
    shown = shown_image(row)
    if shown is not None and lay.image_height > 0:
        img = as_rgb(row.step[shown])
        assert img is not None
        small = resize_nearest(img, w, lay.image_height)
        if dim:
            small = (small * 0.35).astype(np.uint8)
        lines += half_block_lines(small, color_system)
    for k, a in row.step.items():
        kind = kind_of(row, k)
        if k == shown or kind == "hidden":
            continue
        if kind == "text":
            s = printable(row.text.get(k, bytes(a)))
            chunks = [s[i : i + w] for i in range(0, max(len(s), 1), w)][-lay.text_lines :]
            chunks += [""] * (lay.text_lines - len(chunks))
            lines += [(DIM if dim else "") + fit_width(c, w) + RESET for c in chunks]
        elif kind == "audio":
            lines += [(DIM if dim else "") + fit_width(s, w) + RESET for s in wave_lines(a, w)]
        elif kind == "series":
            steps = row.series.get(k, a.reshape(1, -1))
            lines += [(DIM if dim else "") + fit_width(s, w) + RESET for s in series_lines(k, steps, w)]
        else:
            lines.append(DIM + fit_width(summary_line(k, a, row.recent.get(k), w), w) + RESET)
    return [ln if ln.endswith(RESET) else ln + RESET for ln in lines]


def cell_height(row: RowView, lay: CellLayout) -> int:
    """Lines of a cell, without converting its image."""
    return len(cell_lines(row, CellLayout(lay.width, 0, lay.text_lines), "256")) + (lay.image_height + 1) // 2


def choose_layout(frame: Frame, width: int, height: int) -> tuple[int, CellLayout]:
    """Columns and cell size that fit ``frame``'s rows into ``width`` x ``height`` terminal cells."""
    n = max(len(frame.rows), 1)
    shown = shown_image(frame.rows[0]) if frame.rows else None
    img = as_rgb(frame.rows[0].step[shown]) if shown is not None else None
    aspect = img.shape[0] / img.shape[1] if img is not None else 0.0
    best = (1, CellLayout(max(12, min(48, width)), 0))
    for cols in range(1, n + 1):
        cw = min(48, (width + 1) // cols - 1)
        if cw < 12:
            break
        lay = CellLayout(cw, round(cw * aspect / 2) * 2 if img is not None else 0)
        h = cell_height(frame.rows[0], lay) if frame.rows else 1
        best = (cols, lay)
        if math.ceil(n / cols) * h <= height:
            return best
    cols, lay = best
    if img is not None:  # nothing fits at full size: shrink the images so the whole grid shows
        other = cell_height(frame.rows[0], CellLayout(lay.width, 0))
        per_cell = height // math.ceil(n / cols) - other
        lay = CellLayout(lay.width, max(2, per_cell * 2))
    return cols, lay


def grid_lines(frame: Frame, cols: int, lay: CellLayout, color_system: str) -> list[str]:
    """The whole grid: cells side by side, separated by one space."""
    cells = [cell_lines(r, lay, color_system) for r in frame.rows]
    out: list[str] = []
    blank = " " * lay.width
    for start in range(0, len(cells), cols):
        group = cells[start : start + cols]
        h = max(len(c) for c in group)
        for i in range(h):
            out.append(" ".join(c[i] if i < len(c) else blank for c in group))
    return out
