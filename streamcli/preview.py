"""Rich renderables for ``streamcli preview``: the grid of batch rows and the statistics panel.

Images are drawn with half-block characters (``▀``: foreground = upper pixel, background = lower pixel).
Building one Rich ``Style`` per cell is far too slow for a live stream (about 120 ms for a 128x128 frame),
so each terminal line is assembled as one pre-built ANSI string with numpy (fixed-width escape codes filled
in by table lookup) and emitted as a zero-width control segment. Rich cannot measure such lines, so the
grid computes its own widths and is rendered without padding (``Live(screen=False)`` in an alternate
screen opened by the caller).

This is the only library module that imports rich besides the CLI. The library never prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.cells import set_cell_size
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.segment import ControlType, Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from streamcli.batch import Batch
    from streamcli.stats import LoaderStats

RESET = "\x1b[0m"
DIM = "\x1b[2m"
BOLD = "\x1b[1m"
REVERSE = "\x1b[7m"
_SPARK = "▁▂▃▄▅▆▇█"
_DIGITS = np.array([list(f"{i:03d}".encode()) for i in range(256)], dtype=np.uint8)  # zero-padded 000-255


# ----------------------------------------------------------------------------------------------------------
# Images.


def as_rgb(arr: np.ndarray) -> np.ndarray | None:
    """An image step as uint8 (H, W, 3), from HWC or CHW with 1, 3 or 4 channels; None if not an image."""
    if arr.ndim == 2 and arr.dtype == np.uint8 and min(arr.shape) >= 4:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        return None
    hwc, chw = arr.shape[-1] in (1, 3, 4), arr.shape[0] in (1, 3, 4)
    if hwc and (not chw or arr.shape[-1] == 3):  # ambiguous shapes such as (4, 6, 3): trust a final 3
        img = arr
    elif chw:
        img = np.moveaxis(arr, 0, -1)
    else:
        return None
    if min(img.shape[:2]) < 2:
        return None
    if img.dtype != np.uint8:
        if not np.issubdtype(img.dtype, np.floating):
            return None
        img = (np.clip(np.nan_to_num(img), 0.0, 1.0) * 255).astype(np.uint8)
    if img.shape[-1] == 1:
        img = np.repeat(img, 3, axis=-1)
    return np.ascontiguousarray(img[..., :3])


def resize_nearest(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Nearest-neighbour resize by index arrays (no per-pixel Python)."""
    ys = (np.arange(height) * img.shape[0] // max(height, 1)).clip(0, img.shape[0] - 1)
    xs = (np.arange(width) * img.shape[1] // max(width, 1)).clip(0, img.shape[1] - 1)
    out: np.ndarray = img[ys[:, None], xs[None, :]]
    return out


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


# ----------------------------------------------------------------------------------------------------------
# Cells: one per batch row, built from the row's current step.


@dataclass
class RowView:
    """What the grid shows for one batch row: its current step and labels (numpy copies, no tensors)."""

    row: int
    name: str
    position: int
    length: int | None
    valid: bool
    reset: bool
    step: dict[str, np.ndarray]
    text: dict[str, bytes] = field(default_factory=dict)  # text fields: the row's bytes over the batch

    def label(self) -> str:
        if not self.valid:
            return f"{self.row:>2} (padding)"
        pos = f"{self.position + 1}/{self.length}" if self.length else f"{self.position + 1}"
        return f"{self.row:>2} {self.name} {pos}"


@dataclass
class Frame:
    """The displayed state of one batch, detached from the loader's shared memory."""

    rows: list[RowView]
    index: int
    epoch: int
    time_steps: int


def _text_fields(batch: Batch) -> list[str]:
    return [k for k, v in batch.data.items() if v.dtype.is_floating_point is False and k == "text"]


def frame_from_batch(
    batch: Batch,
    name_of: Callable[[int], str] = str,
    length_of: Callable[[int], int | None] = lambda i: None,
) -> Frame:
    """Each row's current step: its last valid step in this batch (or the last step, dimmed, if none)."""
    tb = batch.layout == "TB"
    valid = batch.valid.numpy()
    stream = batch.stream.numpy()
    position = batch.position.numpy()
    is_first = batch.is_first.numpy()
    reset = batch.reset.numpy()
    data = {k: v.numpy() for k, v in batch.data.items()}
    text_names = _text_fields(batch)
    rows = []
    for b in range(batch.batch_size):
        col = valid[:, b] if tb else valid[b]
        ts = np.flatnonzero(col)
        t = int(ts[-1]) if ts.size else col.shape[0] - 1

        def at(a: np.ndarray, t: int = t, b: int = b) -> np.ndarray:
            return np.asarray(a[t, b] if tb else a[b, t])

        ok = bool(at(valid))
        sid = int(at(stream))
        text: dict[str, bytes] = {}
        for name in text_names:
            seq = data[name][:, b] if tb else data[name][b]
            mask = col
            chunks = seq[mask]
            if "nbytes" in data:
                nb = (data["nbytes"][:, b] if tb else data["nbytes"][b])[mask]
                text[name] = b"".join(bytes(c[: int(n)]) for c, n in zip(chunks, nb, strict=True))
            else:
                text[name] = bytes(chunks.reshape(-1))
        rows.append(
            RowView(
                row=b,
                name=name_of(sid) if ok and sid >= 0 else "",
                position=int(at(position)),
                length=length_of(sid) if ok and sid >= 0 else None,
                valid=ok,
                reset=bool(reset[b]) or bool((is_first[:, b] if tb else is_first[b]).any()),
                step={k: np.array(at(v)) for k, v in data.items()},
                text=text,
            )
        )
    return Frame(rows, batch.index, batch.epoch, batch.time_steps)


def field_kind(name: str, arr: np.ndarray) -> str:
    """``image``, ``text``, ``wave`` (audio or 1-D signals) or ``summary``."""
    if name == "text" and arr.dtype == np.uint8 and arr.ndim == 1:
        return "text"
    if as_rgb(arr) is not None:
        return "image"
    signal = arr.dtype == np.int16 or np.issubdtype(arr.dtype, np.floating)
    if signal and ((arr.ndim == 1 and arr.size >= 8) or (arr.ndim == 2 and arr.shape[0] >= 16 and arr.shape[1] <= 8)):
        return "wave"  # audio [samples, channels] or a 1-D signal; small matrices are summarised
    return "summary"


def fit_width(s: str, width: int) -> str:
    """``s`` cropped or padded to exactly ``width`` terminal cells."""
    return set_cell_size(s, width)


def _printable(data: bytes) -> str:
    s = data.decode("utf-8", errors="replace")
    return "".join(c if c.isprintable() else ("⏎" if c == "\n" else "·") for c in s)


def spark(values: np.ndarray, lo: float | None = None, hi: float | None = None) -> str:
    """A one-line sparkline of ``values`` scaled to [lo, hi] (their range if not given)."""
    if values.size == 0:
        return ""
    v = values.astype(np.float64)
    lo = float(v.min()) if lo is None else lo
    hi = float(v.max()) if hi is None else hi
    idx = np.zeros(v.shape, dtype=np.int64) if hi <= lo else ((v - lo) / (hi - lo) * 7.999).astype(np.int64)
    return "".join(_SPARK[i] for i in idx.clip(0, 7))


def _binned_peak(x: np.ndarray, bins: int) -> np.ndarray:
    edges = np.linspace(0, x.size, bins + 1).astype(np.int64)
    edges[1:] = np.maximum(edges[1:], edges[:-1] + 1)
    edges = edges.clip(0, x.size)
    return np.maximum.reduceat(np.abs(x.astype(np.float64)), edges[:-1].clip(0, x.size - 1))


def wave_lines(arr: np.ndarray, width: int) -> list[str]:
    """Audio (int16 [samples, channels]) or a 1-D signal: a peak strip per channel and a level bar."""
    x = arr if arr.ndim == 2 else arr[:, None]
    lines = []
    if arr.dtype == np.int16:
        full = 32768.0
        for c in range(min(x.shape[1], 2)):
            lines.append(spark(_binned_peak(x[:, c], width), 0.0, full))
        rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) / full
        db = 20 * math.log10(max(rms, 1e-6))
        n = round(max(0.0, (db + 60) / 60) * (width - 8))
        lines.append(f"{'█' * n}{'░' * (width - 8 - n)} {db:5.0f}dB")
    else:
        v = x[:, 0]
        idx = np.linspace(0, v.size - 1, min(width, v.size)).astype(np.int64)
        lines.append(spark(v[idx]))
    return lines


def summary_line(name: str, arr: np.ndarray) -> str:
    if arr.size == 1:
        v = arr.reshape(-1)[0]
        return f"{name}={v:.4g}" if np.issubdtype(arr.dtype, np.floating) else f"{name}={v}"
    if arr.size == 0:
        return f"{name} (empty)"
    a = arr.astype(np.float64)
    return f"{name} {arr.dtype.name}{list(arr.shape)} {a.min():.3g}..{a.max():.3g} μ{a.mean():.3g}"


@dataclass
class CellLayout:
    width: int
    image_height: int  # pixel rows (two per line)
    text_lines: int = 3


def cell_lines(row: RowView, lay: CellLayout, color_system: str) -> list[str]:
    """The cell of one row as exactly-``lay.width``-wide ANSI lines."""
    w = lay.width
    dim = not row.valid
    head = fit_width(row.label(), w - 2)
    mark = f"{REVERSE}{BOLD}↺{RESET}" if row.reset else " "
    style = DIM if dim else BOLD
    lines = [f"{mark} {style}{head}{RESET}"]
    shown = next((k for k, a in row.step.items() if field_kind(k, a) == "image"), None)
    if shown is not None and lay.image_height > 0:
        img = as_rgb(row.step[shown])
        assert img is not None
        small = resize_nearest(img, w, lay.image_height)
        if dim:
            small = (small * 0.35).astype(np.uint8)
        lines += half_block_lines(small, color_system)
    for k, a in row.step.items():
        kind = field_kind(k, a)
        if k == shown:
            continue
        if kind == "text":
            s = _printable(row.text.get(k, bytes(a)))
            chunks = [s[i : i + w] for i in range(0, max(len(s), 1), w)][-lay.text_lines :]
            chunks += [""] * (lay.text_lines - len(chunks))
            lines += [(DIM if dim else "") + fit_width(c, w) + RESET for c in chunks]
        elif kind == "wave":
            lines += [(DIM if dim else "") + fit_width(s, w) + RESET for s in wave_lines(a, w)]
        elif kind == "summary" or kind == "image":
            if k == "nbytes" and "text" in row.step:
                continue
            lines.append(DIM + fit_width(summary_line(k, a), w) + RESET)
    return [ln if ln.endswith(RESET) else ln + RESET for ln in lines]


class AnsiLines:
    """Pre-built ANSI lines emitted as zero-width control segments (Rich can neither measure nor crop them)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield Segment(line, None, [(ControlType.CURSOR_FORWARD, 0)])
            yield Segment.line()


def cell_height(row: RowView, lay: CellLayout) -> int:
    """Lines of a cell, without converting its image."""
    return len(cell_lines(row, CellLayout(lay.width, 0, lay.text_lines), "256")) + (lay.image_height + 1) // 2


def choose_layout(frame: Frame, width: int, height: int) -> tuple[int, CellLayout]:
    """Columns and cell size that fit ``frame``'s rows into ``width`` x ``height`` terminal cells."""
    n = max(len(frame.rows), 1)
    sample = frame.rows[0].step if frame.rows else {}
    img = next((as_rgb(a) for k, a in sample.items() if field_kind(k, a) == "image"), None)
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


# ----------------------------------------------------------------------------------------------------------
# Statistics.


def _bar(frac: float, width: int = 20) -> Text:
    frac = min(max(frac, 0.0), 1.0)
    n = round(frac * width)
    color = "red" if frac > 0.9 else "yellow" if frac > 0.6 else "green"
    return Text("█" * n, color) + Text("░" * (width - n), "dim") + Text(f" {frac * 100:3.0f}%")


def stats_panel(stats: LoaderStats, *, title: str = "loader", paused: bool = False, skipped: int = 0) -> Panel:
    """Throughput, consumer waits (with a sparkline), worker utilisation, slots, streams and epoch.

    ``skipped`` counts the files the source skipped when it was built; ``stats.skipped`` adds the streams
    skipped while running.
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
        label = f"worker {i}" if len(stats.worker_busy) > 1 or i else "worker 0"
        t.add_row(label, _bar(busy))
    t.add_row("ready slots", f"{stats.ready_slots}/{stats.num_slots}")
    t.add_row(
        "streams",
        f"{stats.streams_done}/{stats.streams_total} done  epoch {stats.epoch}  "
        f"skipped/failed {stats.skipped + skipped}  batches {stats.batches}",
    )
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
) -> Group:
    """The whole preview: notice line, grid, statistics panel and key help."""
    parts: list[Any] = []
    if notice:
        parts.append(Text(notice, "bold yellow"))
    stats_h = 6 + (len(stats.worker_busy) if stats else 0)
    notice_h = math.ceil(len(notice) / max(width, 1)) if notice else 0
    if frame is not None:
        avail = max(height - stats_h - notice_h - 2, 4)  # the statistics always stay on screen
        cols, lay = choose_layout(frame, width, avail)
        head = f"batch {frame.index}  epoch {frame.epoch}  T={frame.time_steps}  rows={len(frame.rows)}"
        parts.append(Text(head, "dim"))
        parts.append(AnsiLines(grid_lines(frame, cols, lay, color_system)[:avail]))
    if stats is not None:
        parts.append(stats_panel(stats, title=title, paused=paused, skipped=skipped))
    parts.append(Text("q quit   space pause   n next batch (paused)", "dim"))
    return Group(*parts)


def text_summary(frame: Frame | None, stats: LoaderStats | None, *, title: str = "loader", skipped: int = 0) -> Group:
    """A colourless final summary for non-terminals (CI, pipes): one line per row, then the statistics."""
    parts: list[Any] = []
    if frame is not None:
        parts.append(Text(f"batch {frame.index}  epoch {frame.epoch}  T={frame.time_steps}", "dim"))
        for r in frame.rows:
            bits = []
            for k, a in r.step.items():
                kind = field_kind(k, a)
                if kind == "text":
                    bits.append(repr(_printable(r.text.get(k, bytes(a)))[-40:]))
                elif kind == "image":
                    img = as_rgb(a)
                    bits.append(f"{k} {img.shape[1]}x{img.shape[0]}" if img is not None else k)
                elif not (k == "nbytes" and "text" in r.step):
                    bits.append(summary_line(k, a))
            parts.append(Text(("↺ " if r.reset else "  ") + r.label() + "  " + "  ".join(bits)))
    if stats is not None:
        parts.append(stats_panel(stats, title=title, skipped=skipped))
    return Group(*parts)


def contact_sheet(frame: Frame, cell: int = 192) -> np.ndarray:
    """The grid as an RGB image: one labelled tile per row (images scaled, other fields as text)."""
    import cv2

    font = cv2.FONT_HERSHEY_SIMPLEX
    tiles = []
    for r in frame.rows:
        fields = list(r.step.items())
        img = next((as_rgb(a) for k, a in fields if field_kind(k, a) == "image"), None)
        if img is not None:
            h = max(1, round(cell * img.shape[0] / img.shape[1]))
            body = cv2.resize(img, (cell, h), interpolation=cv2.INTER_NEAREST)
        else:
            body = np.zeros((cell // 2, cell, 3), np.uint8)
        lines = []
        for k, a in fields:
            kind = field_kind(k, a)
            if kind == "text":
                s = _printable(r.text.get(k, bytes(a))).encode("ascii", "replace").decode()
                lines += [s[i : i + 24] for i in range(0, len(s), 24)][-4:]
            elif kind == "wave":
                x = a if a.ndim == 1 else a[:, 0]
                y = x.astype(np.float64)
                span = float(np.abs(y).max()) or 1.0
                pts = np.stack([np.linspace(0, cell - 1, y.size), (0.5 - y / span / 2.2) * (body.shape[0] - 1)], 1)
                cv2.polylines(body, [pts.astype(np.int32)], False, (80, 220, 120), 1)
            elif kind == "summary" and not (k == "nbytes" and "text" in r.step):
                lines.append(summary_line(k, a)[:30])
        for i, s in enumerate(lines[:6]):
            cv2.putText(body, s, (4, 14 + 14 * i), font, 0.38, (230, 230, 230), 1, cv2.LINE_AA)
        if not r.valid:
            body = (body * 0.35).astype(np.uint8)
        label = np.full((20, cell, 3), (40, 40, 40) if not r.reset else (150, 40, 40), np.uint8)
        text = ("RESET " if r.reset else "") + r.label().strip()
        cv2.putText(label, text[:32], (4, 14), font, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
        tiles.append(np.concatenate([label, body], 0))
    th = max(t.shape[0] for t in tiles)
    tiles = [np.pad(t, ((0, th - t.shape[0]), (0, 0), (0, 0))) for t in tiles]
    cols = max(1, math.ceil(math.sqrt(len(tiles))))
    while len(tiles) % cols:
        tiles.append(np.zeros_like(tiles[0]))
    rows = [
        np.concatenate([np.pad(t, ((2, 2), (2, 2), (0, 0))) for t in tiles[i : i + cols]], 1)
        for i in range(0, len(tiles), cols)
    ]
    return np.concatenate(rows, 0)


def snapshot_png(frame: Frame, path: str | Any) -> None:
    """Write ``contact_sheet(frame)`` to ``path`` with OpenCV."""
    import cv2

    from streamcli.errors import StreamcliError

    if not cv2.imwrite(str(path), contact_sheet(frame)[..., ::-1].copy()):
        raise StreamcliError(f"could not write the snapshot {str(path)!r}")
