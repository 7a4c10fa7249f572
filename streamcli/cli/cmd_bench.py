"""``streamcli bench``: sweep worker counts, print medians and name the bottleneck."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from streamcli.cli._aliases import SOURCE_OPTION, deprecated, warn
from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure
from streamcli.cli._loading import check_config, open_loader
from streamcli.cli._noise import CollectedWarnings
from streamcli.cli._options import LOADER, LoaderOptions, default_workers, loader_command
from streamcli.cli._sources import SourceArgs, SourceOpts, resolve_source
from streamcli.stats import padding_hint

if TYPE_CHECKING:
    from streamcli.bench import BenchResult


DEFAULT_SWEEP = list(range(default_workers() + 1))  # 0 up to the shared default worker count


_SWEEP_HELP = (
    "A worker count to measure; repeat it to sweep several (-w 0 -w 2). Default: 0 up to preview's and export's "
    f"default ({', '.join(map(str, DEFAULT_SWEEP))} here)."
)


FULL = (100, 10, 3)  # timed batches, warm-up batches, runs per worker count
QUICK = (20, 2, 1)  # --quick


def time_left(done: int, total: int, elapsed_s: float) -> str:
    """ "about 2 min 10 s left", from the mean time of the ``done`` runs so far; "" before the first ends."""
    if done <= 0 or done >= total:
        return ""
    left = round(elapsed_s / done * (total - done))
    minutes, seconds = divmod(left, 60)
    return f"about {minutes} min {seconds} s left" if minutes else f"about {seconds} s left"


class RunProgress:
    """``on_run`` for ``run_benchmark``: the runs done of all of them and the time left, estimated from the runs
    so far. A transient Rich bar on a terminal; elsewhere (CI logs, pipes) one line per run."""

    def __init__(self, total: int, repeats: int, console: Console, *, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.total, self.repeats, self.console, self.enabled, self.clock = total, repeats, console, enabled, clock
        self.started: float | None = None
        self.done = -1  # runs finished: each call starts the next run
        self.bar: Progress | None = None
        if enabled and console.is_terminal:
            # the estimate averages every run so far (runs take seconds to minutes; Rich's default is the last 30 s)
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("runs,"),
                       TimeRemainingColumn(compact=True), TextColumn("left"))  # fmt: skip
            self.bar = Progress(*columns, console=console, transient=True, speed_estimate_period=24 * 3600,
                                get_time=clock)  # fmt: skip
            self.task = self.bar.add_task("bench", total=total)
            self.bar.start()

    def __call__(self, name: str, workers: int, repeat: int) -> None:
        now = self.clock()
        if self.started is None:
            self.started = now
        self.done += 1
        what = f"{name}: workers={workers} run {repeat + 1}/{self.repeats}"
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, description=what)
        elif self.enabled:
            left = time_left(self.done, self.total, now - self.started)
            self.console.print(f"[dim]{what} ({self.done + 1} of {self.total}{'; ' + left if left else ''})[/]",
                               highlight=False)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def parse_workers(given: list[str] | str | None) -> list[int]:
    """The worker counts of ``-w N`` repeated; a comma list in one ``-w`` (the old spelling) is read with a
    warning."""
    if given is None or not given:
        return list(DEFAULT_SWEEP)
    values = [given] if isinstance(given, str) else given
    out: list[int] = []
    for text in values:
        parts = [p for p in text.split(",") if p.strip()]
        try:
            counts = [int(p) for p in parts]
        except ValueError:
            raise UsageFailure(f"-w/--workers {text!r} must be a worker count, e.g. -w 0 -w 2") from None
        if not counts or min(counts) < 0:
            raise UsageFailure(f"-w/--workers {text!r} must be a worker count >= 0, e.g. -w 0 -w 2")
        out += counts
    if any("," in v for v in values):
        warn("a comma list in -w (-w 0,1,2)", "-w 0 -w 1 -w 2")
    return out


COLUMNS = ("loader", "workers", "batches/s", "steps/s", "real steps", "MB/s", "wait p50", "wait p95", "busy",
           "1st batch", "peak RSS")  # fmt: skip


def result_cells(r: BenchResult) -> list[str]:
    """One result as the table's cells; an unknown worker load (a run too short to sample) shows "-"."""
    busy = f"{r.busy * 100:.0f}%" if r.busy == r.busy else "-"
    return [
        r.name, str(r.workers), f"{r.batches_per_s:.1f}", f"{r.steps_per_s:,.0f}",
        f"{r.useful_share:.0%}" if r.useful_share == r.useful_share else "-", f"{r.mb_per_s:.1f}",
        f"{r.wait_p50_ms:.2f} ms", f"{r.wait_p95_ms:.2f} ms", busy, f"{r.first_batch_s:.2f} s",
        f"{r.peak_rss_mb:.0f} MB",
    ]  # fmt: skip


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


def bench(
    source: SourceArgs = None,
    option: SourceOpts = None,
    workers: Annotated[
        list[str] | None,
        typer.Option("--workers", "-w", help=_SWEEP_HELP, rich_help_panel=LOADER, metavar="N", show_default=False),
    ] = None,
    batches: Annotated[
        int | None, typer.Option(help="Timed batches per run [default: 100; 20 with --quick].", min=1)
    ] = None,
    warmup: Annotated[
        int | None, typer.Option(help="Untimed batches first (start-up, caches) [default: 10; 2 with --quick].", min=0)
    ] = None,
    repeats: Annotated[
        int | None,
        typer.Option(help="Runs per configuration; medians are reported [default: 3; 1 with --quick].", min=1),
    ] = None,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="A short measurement: one run per worker count, 20 timed batches after 2 warm-up ones (instead of "
            "3 runs of 100 after 10): rougher figures, sooner. --batches, --warmup and "
            "--repeats still override it.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress and no hint: the results only (errors on stderr).")
    ] = False,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Draw a bar chart to this PNG.", dir_okay=False)
    ] = None,
    *,
    opts: LoaderOptions,
) -> None:
    """Measure throughput at each worker count: batches/s, steps/s, MB/s, waits, worker load, start-up, RSS.

    Each worker count runs --repeats times (a fresh loader each) and reports medians; a progress line shows the
    runs done and an estimate of the time left. --quick measures briefly, for a first look.
    """
    from streamcli.bench import run_benchmark
    from streamcli.cli._bench_verdict import bottleneck, scheduling

    defaults = QUICK if quick else FULL
    batches = defaults[0] if batches is None else batches
    warmup = defaults[1] if warmup is None else warmup
    repeats = defaults[2] if repeats is None else repeats

    counts = parse_workers(workers)
    for w in counts:  # every count of the sweep, before the first run is timed
        check_config(opts, num_workers=w)
    opts.num_workers = counts[0]
    batch_size, time_steps = opts.batch_size, opts.time_steps
    spec = resolve_source(source, option)
    open_loader(spec, opts).close()  # bad option values fail here, before any timing
    progress = RunProgress(len(counts) * repeats, repeats, Console(stderr=True), enabled=not (as_json or quiet))
    try:
        with CollectedWarnings(STATE.debug) as caught:
            results = run_benchmark(
                lambda w: open_loader(spec, opts, num_workers=w),
                counts,
                batches=batches,
                warmup=warmup,
                repeats=repeats,
                on_run=progress,
            )
    finally:
        progress.close()
    caught.report()
    best = max(results, key=lambda r: r.steps_per_s)
    title = f"{spec.label()}  B={batch_size} T={time_steps}  {batches} batches x {repeats} runs (medians)"
    if as_json:
        out: dict[str, Any] = {
            "source": spec.record(),
            "batch_size": batch_size,
            "time_steps": time_steps,
            "results": [r.to_json() for r in results],
            "bottleneck": bottleneck(best),
            "scheduling": scheduling(best),
            "best_workers": best.workers,
            "useful_share": None if best.useful_share != best.useful_share else best.useful_share,
        }
        typer.echo(json.dumps(out, indent=1))
    else:
        console = Console()
        if console.is_terminal:
            console.print(results_table(results, title))
            console.print(f"[bold]bottleneck[/] (workers={best.workers}): {bottleneck(best)}", highlight=False)
        else:
            typer.echo(results_text(results, title))
            typer.echo(f"bottleneck (workers={best.workers}): {bottleneck(best)}")
        sched = scheduling(best)
        if sched and console.is_terminal:
            console.print(f"[bold]scheduling[/] (workers={best.workers}): {sched}", highlight=False)
        elif sched:
            typer.echo(f"scheduling (workers={best.workers}): {sched}")
        assert spec.source is not None
        hint = padding_hint(best.useful_share, best.streams or len(spec.source.items()), batch_size,
                            best.longest_stream, best.epoch_steps)  # fmt: skip
        if hint and not quiet:
            Console(stderr=True).print(f"[yellow]hint:[/] {hint}", highlight=False)
    if plot_path is not None:
        plot(results, plot_path, title)


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli bench video samples/clips -w 0 -w 1 -w 2 --quick  |  "
        "streamcli bench camera -s steps=64 -b 32 --quick --json  |  "
        "streamcli bench text samples/text --quick --plot bench.png",
    )(loader_command(workers=False)(deprecated(SOURCE_OPTION)(bench)))
