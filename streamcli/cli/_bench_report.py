"""How ``streamcli bench`` shows its results: a Rich table on a terminal, aligned plain text in a pipe, and the
``--plot`` bar chart.

Separate from the command, which runs the sweep and says what it concludes (``_bench_verdict``): this only lays
out figures already measured.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.table import Table

from streamcli.cli._common import UsageFailure

if TYPE_CHECKING:
    from streamcli.bench import BenchResult


COLUMNS = (
    "loader",
    "workers",
    "batches/s",
    "steps/s",
    "real steps",
    "MB/s",
    "wait p50",
    "wait p95",
    "busy",
    "1st batch",
    "peak RSS",
)


def result_cells(r: BenchResult) -> list[str]:
    """One result as the table's cells; an unknown worker load (a run too short to sample) shows "-"."""
    busy = f"{r.busy * 100:.0f}%" if r.busy == r.busy else "-"
    return [
        r.name,
        str(r.workers),
        f"{r.batches_per_s:.1f}",
        f"{r.steps_per_s:,.0f}",
        f"{r.useful_share:.0%}" if r.useful_share == r.useful_share else "-",
        f"{r.mb_per_s:.1f}",
        f"{r.wait_p50_ms:.2f} ms",
        f"{r.wait_p95_ms:.2f} ms",
        busy,
        f"{r.first_batch_s:.2f} s",
        f"{r.peak_rss_mb:.0f} MB",
    ]


def results_table(results: list[BenchResult], title: str) -> Table:
    """The table for a terminal."""
    t = Table(title=title, title_justify="left")
    for col in COLUMNS:
        t.add_column(col, justify="left" if col == "loader" else "right")
    for r in results:
        t.add_row(*result_cells(r))
    return t


def results_text(results: list[BenchResult], title: str) -> str:
    """The table for a pipe or CI log: plain aligned columns, full names, never cut to the 80-column default."""
    rows = [list(COLUMNS)] + [result_cells(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = [title]
    for row in rows:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


_NICE = (1.0, 2.0, 2.5, 5.0, 10.0)


def ticks(top: float, n: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (about ``n`` of them)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / n
    mag = 10 ** np.floor(np.log10(raw))
    step = next(m * mag for m in _NICE if m * mag >= raw)
    return [float(i * step) for i in range(int(np.ceil(top / step)) + 1)]


def plot(results: list[BenchResult], path: Path, title: str) -> None:
    """A bar chart of steps/s per configuration with a y axis, ticks and a legend, drawn with OpenCV."""
    import cv2

    font, aa, black = cv2.FONT_HERSHEY_SIMPLEX, cv2.LINE_AA, (0, 0, 0)
    w, h, left, bottom, top_margin = 760, 440, 90, 70, 70
    img = np.full((h, w, 3), 255, np.uint8)
    names = list(dict.fromkeys(r.name for r in results))
    palette = [(200, 120, 40), (60, 60, 200), (60, 160, 60), (150, 60, 150)]  # BGR
    colour = {n: palette[i % len(palette)] for i, n in enumerate(names)}
    marks = ticks(max(r.steps_per_s for r in results))
    span = marks[-1] or 1.0
    plot_h = h - bottom - top_margin

    def y_of(v: float) -> int:
        return int(h - bottom - plot_h * v / span)

    cv2.putText(img, title[:95], (10, 22), font, 0.45, black, 1, aa)
    cv2.putText(img, "steps/s", (10, top_margin - 12), font, 0.45, black, 1, aa)
    for v in marks:  # y axis: ticks, values and faint grid lines
        y = y_of(v)
        cv2.line(img, (left - 5, y), (left, y), black, 1)
        cv2.line(img, (left + 1, y), (w - 10, y), (225, 225, 225), 1)
        label = f"{v:,.0f}"
        (tw, _), _ = cv2.getTextSize(label, font, 0.4, 1)
        cv2.putText(img, label, (left - 8 - tw, y + 4), font, 0.4, black, 1, aa)
    bw = (w - left - 20) // max(len(results), 1)
    for i, r in enumerate(results):
        x0, y = left + i * bw + 8, y_of(r.steps_per_s)
        cv2.rectangle(img, (x0, y), (x0 + bw - 16, h - bottom), colour[r.name], -1)
        cv2.putText(img, f"{r.steps_per_s:,.0f}", (x0, y - 6), font, 0.38, black, 1, aa)
        cv2.putText(img, f"w={r.workers}", (x0, h - bottom + 18), font, 0.45, black, 1, aa)
    cv2.line(img, (left, h - bottom), (w - 10, h - bottom), black, 1)
    cv2.line(img, (left, top_margin - 5), (left, h - bottom), black, 1)
    cv2.putText(img, "worker processes", (left, h - bottom + 40), font, 0.42, black, 1, aa)
    x = left + 200
    for n in names:  # legend: the full loader names
        cv2.rectangle(img, (x, h - 22), (x + 14, h - 8), colour[n], -1)
        cv2.putText(img, n, (x + 20, h - 10), font, 0.45, black, 1, aa)
        x += 30 + cv2.getTextSize(n, font, 0.45, 1)[0][0]
    if not cv2.imwrite(str(path), img):
        raise UsageFailure(f"--plot {str(path)!r}: OpenCV could not write it (use .png)")
