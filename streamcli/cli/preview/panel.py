"""The statistics panel, and the two screens built from it: the live dashboard and the piped summary."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.cells import cell_len
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from streamcli.cli.preview.ansi import AnsiLines, spark
from streamcli.cli.preview.fields import as_rgb, printable, series_lines, summary_line
from streamcli.cli.preview.frame import Frame
from streamcli.cli.preview.grid import choose_layout, grid_lines, kind_of, shown_image

if TYPE_CHECKING:
    from streamcli.stats import LoaderStats


def _bar(frac: float, width: int = 20) -> Text:
    frac = min(max(frac, 0.0), 1.0)
    n = round(frac * width)
    color = "red" if frac > 0.9 else "yellow" if frac > 0.6 else "green"
    return Text("█" * n, color) + Text("░" * (width - n), "dim") + Text(f" {frac * 100:3.0f}%")


def skipped_line(names: Sequence[str], width: int) -> str:
    """The skipped files by name, as many as fit in ``width`` cells, then how many more."""
    out = ""
    for i, name in enumerate(names):
        more = f" and {len(names) - i} more" if i else ""
        piece = (", " if out else "") + name
        if cell_len(out + piece) + cell_len(f" and {len(names) - i - 1} more" if i + 1 < len(names) else "") > width:
            return out + (more if out else f"{len(names)} files")
        out += piece
    return out


def latest_warning(warnings: Sequence[str], width: int) -> str:
    """The latest warning in ``width`` cells, after how many there are (all of them are printed after q)."""
    head = f"({len(warnings)} warnings; all after q) " if len(warnings) > 1 else ""
    text = head + " ".join(warnings[-1].split())
    return text if cell_len(text) <= width else text[: max(width - 1, 0)] + "…"


def stats_panel(
    stats: LoaderStats,
    *,
    title: str = "loader",
    paused: bool = False,
    skipped: int = 0,
    skipped_names: Sequence[str] = (),
    width: int = 100,
    warnings: Sequence[str] = (),
) -> Panel:
    """Throughput, consumer waits (with a sparkline), worker utilisation, slots, streams and epoch.

    ``skipped`` counts the files the source skipped when it was built; ``stats.skipped`` adds the streams
    skipped while running. ``skipped_names`` names them (as many as fit in ``width``), while the run goes on.
    ``warnings`` (a damaged clip, a skipped item) show as they come: the latest, and how many so far.
    """
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "throughput",
        f"{stats.batches_per_s:8.1f} batches/s  {stats.steps_per_s:10.0f} steps/s  {stats.mb_per_s:8.1f} MB/s",
    )
    waits = np.asarray(stats.waits_s, dtype=np.float64) * 1e3
    wmax = float(waits.max()) if waits.size else 0.0
    t.add_row(
        "consumer wait",
        f"p50 {stats.wait_percentile(50) * 1e3:6.1f} ms  p95 {stats.wait_percentile(95) * 1e3:6.1f} ms  "
        f"max {wmax:6.1f} ms  " + spark(waits[-40:], 0.0, max(wmax, 1e-9)),
    )
    for i, busy in enumerate(stats.worker_busy):
        t.add_row(f"worker {i}", _bar(busy))
    t.add_row("ready slots", f"{stats.ready_slots}/{stats.num_slots}")
    t.add_row(
        "streams",
        f"{stats.streams_done}/{stats.streams_total} done  epoch {stats.epoch}  "
        f"skipped/failed {stats.skipped + skipped}  batches {stats.batches}",
    )
    if skipped_names:
        t.add_row("[yellow]skipped[/]", Text(skipped_line(skipped_names, max(width - 22, 20)), "yellow"))
    if warnings:
        t.add_row("[yellow]warning[/]", Text(latest_warning(warnings, max(width - 22, 20)), "yellow"))
    share = stats.useful_share
    if share == share:  # NaN before the first batch
        t.add_row("real data", f"{share:.0%} of the steps (the rest is padding)")
    hint = stats.padding_hint()
    if hint:
        t.add_row("[yellow]hint[/]", f"[yellow]{hint}[/]")
    state = " [reverse yellow] PAUSED [/]" if paused else ""
    return Panel(t, title=f"[bold]{title}[/]{state}", title_align="left", border_style="blue")


def dashboard(
    frame: Frame | None,
    stats: LoaderStats | None,
    *,
    width: int,
    height: int,
    color_system: str,
    title: str = "loader",
    paused: bool = False,
    notice: str | None = None,
    skipped: int = 0,
    skipped_names: Sequence[str] = (),
    warnings: Sequence[str] = (),
) -> Group:
    """The whole preview: notice line, grid, statistics panel and key help.

    ``notice`` (the colour notice) shows only while the grid draws an image: text and numbers look the same in
    any palette.
    """
    parts: list[Any] = []
    if notice and not (frame is not None and any(shown_image(r) is not None for r in frame.rows)):
        notice = None
    if notice:
        parts.append(Text(notice, "bold yellow"))
    stats_h = 6 + (len(stats.worker_busy) if stats else 0) + bool(skipped_names) + bool(warnings)
    notice_h = math.ceil(len(notice) / max(width, 1)) if notice else 0
    if frame is not None:
        avail = max(height - stats_h - notice_h - 2, 4)  # the statistics always stay on screen
        cols, lay = choose_layout(frame, width, avail)
        head = f"batch {frame.index}  epoch {frame.epoch}  T={frame.time_steps}  rows={len(frame.rows)}"
        parts.append(Text(head, "dim"))
        parts.append(AnsiLines(grid_lines(frame, cols, lay, color_system)[:avail]))
    if stats is not None:
        parts.append(
            stats_panel(
                stats,
                title=title,
                paused=paused,
                skipped=skipped,
                skipped_names=skipped_names,
                width=width,
                warnings=warnings,
            )
        )
    parts.append(Text("q quit   space pause   n next batch (paused)", "dim"))
    return Group(*parts)


SERIES_WIDTH = 48  # cells of a series' line in the summary for non-terminals


def text_summary(
    frame: Frame | None,
    stats: LoaderStats | None,
    *,
    title: str = "loader",
    skipped: int = 0,
    skipped_names: Sequence[str] = (),
) -> Group:
    """A colourless final summary for non-terminals (CI, pipes): one line per row, then the statistics."""
    parts: list[Any] = []
    if frame is not None:
        parts.append(Text(f"batch {frame.index}  epoch {frame.epoch}  T={frame.time_steps}", "dim"))
        for r in frame.rows:
            bits, below = [], []
            for k, a in r.step.items():
                kind = kind_of(r, k)
                if kind == "series":  # named on the row's line, a sparkline per dimension under it
                    bits.append(f"{k}[{a.size}]")
                    below += ["     " + s for s in series_lines(k, r.series.get(k, a.reshape(1, -1)), SERIES_WIDTH)]
                elif kind == "text":
                    bits.append(repr(printable(r.text.get(k, bytes(a)))[-40:]))
                elif kind == "image":
                    img = as_rgb(a)
                    bits.append(f"{k} {img.shape[1]}x{img.shape[0]}" if img is not None else k)
                elif kind != "hidden":
                    bits.append(summary_line(k, a, r.recent.get(k)))
            parts.append(Text(("↺ " if r.reset else "  ") + r.label() + "  " + "  ".join(bits)))
            parts += [Text(s) for s in below]
    if stats is not None:
        parts.append(stats_panel(stats, title=title, skipped=skipped, skipped_names=skipped_names))
    return Group(*parts)
