"""``streamcli bench``: sweep worker counts, print medians and name the bottleneck."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from streamcli.cli._common import SourceArgs, SourceOpts, StreamcliCommand, UsageFailure, open_loader, resolve_source
from streamcli.cli._options import LOADER, LoaderOptions, default_workers, loader_command

if TYPE_CHECKING:
    from streamcli.bench import BenchResult


DEFAULT_SWEEP = ",".join(map(str, range(default_workers() + 1)))  # 0 up to the shared default worker count


_SWEEP_HELP = "Worker counts to sweep, comma separated; the default runs 0 up to preview's and export's default."


def parse_workers(text: str) -> list[int]:
    try:
        out = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise UsageFailure(f"--workers {text!r} must be a comma list of counts, e.g. 0,1,2") from None
    if not out or min(out) < 0:
        raise UsageFailure(f"--workers {text!r} must be a comma list of counts >= 0, e.g. 0,1,2")
    return out


def results_table(results: list[BenchResult], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col in (
        "loader",
        "workers",
        "batches/s",
        "steps/s",
        "MB/s",
        "wait p50",
        "wait p95",
        "busy",
        "1st batch",
        "peak RSS",
    ):
        t.add_column(col, justify="left" if col == "loader" else "right")
    for r in results:
        busy = f"{r.busy * 100:.0f}%" if r.busy == r.busy else "-"
        t.add_row(
            r.name, str(r.workers), f"{r.batches_per_s:.1f}", f"{r.steps_per_s:,.0f}", f"{r.mb_per_s:.1f}",
            f"{r.wait_p50_ms:.2f} ms", f"{r.wait_p95_ms:.2f} ms", busy, f"{r.first_batch_s:.2f} s",
            f"{r.peak_rss_mb:.0f} MB",
        )  # fmt: skip
    return t


def plot(results: list[BenchResult], path: Path, title: str) -> None:
    """A bar chart of steps/s per configuration, drawn with OpenCV."""
    import cv2

    w, h, left, bottom = 720, 400, 70, 60
    img = np.full((h, w, 3), 255, np.uint8)
    top = max(r.steps_per_s for r in results) or 1.0
    bw = (w - left - 20) // max(len(results), 1)
    cv2.putText(img, title[:80], (10, 22), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, "steps/s", (5, 50), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    for i, r in enumerate(results):
        x0 = left + i * bw + 8
        bar = int((h - bottom - 60) * r.steps_per_s / top)
        color = (200, 120, 40) if r.name == "streamcli" else (60, 60, 200)
        cv2.rectangle(img, (x0, h - bottom - bar), (x0 + bw - 16, h - bottom), color, -1)
        cv2.putText(
            img, f"{r.steps_per_s:,.0f}", (x0, h - bottom - bar - 6), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 1
        )
        label = f"{'sc' if r.name == 'streamcli' else 'torch'} w={r.workers}"
        cv2.putText(img, label, (x0, h - bottom + 20), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.line(img, (left, h - bottom), (w - 10, h - bottom), (0, 0, 0), 1)
    if not cv2.imwrite(str(path), img):
        raise UsageFailure(f"--plot {str(path)!r}: OpenCV could not write it (use .png)")


def bench(
    source: SourceArgs = None,
    option: SourceOpts = None,
    workers: Annotated[
        str,
        typer.Option(
            "--workers",
            "-w",
            help=_SWEEP_HELP,
            rich_help_panel=LOADER,
        ),
    ] = DEFAULT_SWEEP,
    batches: Annotated[int, typer.Option(help="Timed batches per run.", min=1)] = 100,
    warmup: Annotated[int, typer.Option(help="Untimed batches first (start-up, caches).", min=0)] = 10,
    repeats: Annotated[int, typer.Option(help="Runs per configuration; medians are reported.", min=1)] = 3,
    baseline: Annotated[
        bool, typer.Option("--baseline", help="Also time a plain torch DataLoader on the same source.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")] = False,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Draw a bar chart to this PNG.", dir_okay=False)
    ] = None,
    *,
    opts: LoaderOptions,
) -> None:
    """Measure throughput at each worker count: batches/s, steps/s, MB/s, waits, worker load, start-up, RSS."""
    from streamcli.bench import bottleneck, run_baseline, run_benchmark

    counts = parse_workers(workers)
    opts.num_workers = counts[0]
    batch_size, time_steps = opts.batch_size, opts.time_steps
    spec = resolve_source(source, option)
    open_loader(spec, opts).close()  # bad option values fail here, before any timing
    err = Console(stderr=True)

    def on_run(name: str, w: int, r: int) -> None:
        if not as_json:
            err.print(f"[dim]{name}: workers={w} run {r + 1}/{repeats}[/]", highlight=False)

    results = run_benchmark(
        lambda w: open_loader(spec, opts, num_workers=w),
        counts,
        batches=batches,
        warmup=warmup,
        repeats=repeats,
        on_run=on_run,
    )
    best = max(results, key=lambda r: r.steps_per_s)
    base: list[BenchResult] = []
    if baseline:
        if not as_json:
            err.print("[dim]torch DataLoader baseline...[/]")
        assert spec.source is not None
        base = run_baseline(
            spec.source, batch_size, time_steps, counts, batches=batches, warmup=warmup, repeats=repeats
        )
    title = f"{spec.label()}  B={batch_size} T={time_steps}  {batches} batches x {repeats} runs (medians)"
    if as_json:
        out: dict[str, Any] = {
            "source": spec.record(),
            "batch_size": batch_size,
            "time_steps": time_steps,
            "results": [r.to_json() for r in results + base],
            "bottleneck": bottleneck(best),
            "best_workers": best.workers,
        }
        typer.echo(json.dumps(out, indent=1))
    else:
        console = Console()
        console.print(results_table(results + base, title))
        console.print(f"[bold]bottleneck[/] (workers={best.workers}): {bottleneck(best)}", highlight=False)
    if plot_path is not None:
        plot(results + base, plot_path, title)


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli bench video clips/ -w 0,1,2  |  streamcli bench sine -b 32 --json  |  "
        "streamcli bench text books/ --baseline --plot bench.png",
    )(loader_command(workers=False)(bench))
