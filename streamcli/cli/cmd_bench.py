"""``streamcli bench``: sweep worker counts, print medians and name the bottleneck."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from streamcli.cli._aliases import SOURCE_OPTION, deprecated, warn
from streamcli.cli._bench_report import plot, results_table, results_text
from streamcli.cli._bench_report import ticks as ticks
from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure
from streamcli.cli._loading import check_config, open_loader
from streamcli.cli._noise import CollectedWarnings
from streamcli.cli._options import LOADER, LoaderOptions, default_workers, loader_command
from streamcli.cli._sources import SourceArgs, SourceOpts, resolve_source
from streamcli.cli._trace import TraceFile, trace_kw
from streamcli.stats import padding_hint

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

    def __init__(
        self,
        total: int,
        repeats: int,
        console: Console,
        *,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.total, self.repeats, self.console, self.enabled, self.clock = total, repeats, console, enabled, clock
        self.started: float | None = None
        self.done = -1  # runs finished: each call starts the next run
        self.bar: Progress | None = None
        if enabled and console.is_terminal:
            # the estimate averages every run so far (runs take seconds to minutes; Rich's default is the last 30 s)
            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("runs,"),
                TimeRemainingColumn(compact=True),
                TextColumn("left"),
            )
            self.bar = Progress(
                *columns, console=console, transient=True, speed_estimate_period=24 * 3600, get_time=clock
            )
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
            self.console.print(
                f"[dim]{what} ({self.done + 1} of {self.total}{'; ' + left if left else ''})[/]", highlight=False
            )

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
    trace: TraceFile = None,
    *,
    opts: LoaderOptions,
) -> None:
    """Measure throughput at each worker count: batches/s, steps/s, MB/s, waits, worker load, start-up, RSS.

    Each worker count runs --repeats times (a fresh loader each) and reports medians; a progress line shows the
    runs done and an estimate of the time left. --quick measures briefly, for a first look.
    """
    from streamcli.bench import run_benchmark
    from streamcli.cli._bench_verdict import bottleneck, scheduling, workers_verdict

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
                lambda w: open_loader(spec, opts, num_workers=w, **trace_kw(trace)),  # a trace: the last run's
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
    limit, verdict = bottleneck(best, results), workers_verdict(results)
    title = f"{spec.label()}  B={batch_size} T={time_steps}  {batches} batches x {repeats} runs (medians)"
    if as_json:
        out: dict[str, Any] = {
            "source": spec.record(),
            "batch_size": batch_size,
            "time_steps": time_steps,
            "results": [r.to_json() for r in results],
            "bottleneck": limit,
            "workers_verdict": verdict,
            "scheduling": scheduling(best),
            "best_workers": best.workers,
            "useful_share": None if best.useful_share != best.useful_share else best.useful_share,
        }
        typer.echo(json.dumps(out, indent=1))
    else:
        console = Console()
        if console.is_terminal:
            console.print(results_table(results, title))
            console.print(f"[bold]bottleneck[/] (workers={best.workers}): {limit}", highlight=False)
            if verdict:
                console.print(f"[bold]verdict:[/] {verdict}", highlight=False)
        else:
            typer.echo(results_text(results, title))
            typer.echo(f"bottleneck (workers={best.workers}): {limit}")
            if verdict:
                typer.echo(f"verdict: {verdict}")
        sched = scheduling(best)
        if sched and console.is_terminal:
            console.print(f"[bold]scheduling[/] (workers={best.workers}): {sched}", highlight=False)
        elif sched:
            typer.echo(f"scheduling (workers={best.workers}): {sched}")
        assert spec.source is not None
        hint = padding_hint(
            best.useful_share,
            best.streams or len(spec.source.items()),
            batch_size,
            best.longest_stream,
            best.epoch_steps,
        )
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
