"""``streamcli preview``: a live view of every batch row's current step, plus loader statistics."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.live import Live

from streamcli.cli._aliases import SOURCE_OPTION, Alias, deprecated
from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure
from streamcli.cli._loading import check_config, open_loader
from streamcli.cli._noise import CollectedWarnings, NativeStderr
from streamcli.cli._options import LoaderOptions, loader_command
from streamcli.cli._preview_live import KeyReader, Pace, live_loop
from streamcli.cli._sources import SourceArgs, SourceOpts, resolve_source
from streamcli.cli._trace import TraceFile, trace_kw

if TYPE_CHECKING:
    from streamcli.batch import Batch
    from streamcli.cli.preview import Frame

RENDER_HZ = 12.0  # cap: drawing must not starve the loader


def colour_notice(console: Console) -> tuple[str, str | None]:
    """The colour system to draw with, and a notice when it is not 24-bit (never degrade silently)."""
    system = console.color_system
    if system == "truecolor":
        return "truecolor", None
    where = "tmux" if os.environ.get("TMUX") else f"TERM={os.environ.get('TERM', '')}"
    return "256", (
        f"{where}: the terminal reports {system or 'no'} colours, so images use the 256-colour palette; "
        "set COLORTERM=truecolor (e.g. COLORTERM=truecolor streamcli preview ...) for 24-bit colour"
    )


def closing_line(n: int, steps: int, nbytes: int, t0: float, marks: list[float]) -> str:
    """The preview's last line; every rate in it is its own counts over its own time, both printed.

    The whole run (start-up included) and the steady part (from the first batch to the last) are two windows,
    each stated with the batches it holds.
    """
    elapsed = max((marks[-1] if marks else time.perf_counter()) - t0, 1e-9)
    line = (
        f"preview: {n} batches ({steps} steps, {nbytes / 1e6:.1f} MB) in {elapsed:.3g} s: {n / elapsed:.1f} "
        f"batches/s, {steps / elapsed:.0f} steps/s, {nbytes / 1e6 / elapsed:.1f} MB/s, start-up included"
    )
    if len(marks) > 1 and marks[-1] > marks[0]:
        span = marks[-1] - marks[0]
        line += (
            f"; the first batch came after {marks[0] - t0:.3g} s, then {n - 1} more in {span:.3g} s, "
            f"{(n - 1) / span:.1f} batches/s"
        )
    return line


def event_displays(source: Any) -> dict[str, str]:
    """The preview's ``events:<representation>`` hint for an events source's windows (drawn as images)."""
    from streamcli_sources.events import EventsSource

    from streamcli.cli.preview.fields import EVENT_VIEWS

    if isinstance(source, EventsSource) and source.representation in EVENT_VIEWS:
        return {"events": f"events:{source.representation}"}
    return {}


class Skips:
    """The names of the files skipped so far: by the source when it was built (its ``skipped`` list of
    ``(path, why)``), then by the loader as it runs (its state's ``skipped`` items, this epoch's)."""

    def __init__(self, source: Any) -> None:
        built = getattr(source, "skipped", None) or ()
        self.built = [Path(str(s[0] if isinstance(s, (tuple, list)) else s)).name for s in built]
        self.running: dict[int, str] = {}
        self._seen = 0

    def names(self, loader: Any) -> list[str]:
        count = loader.stats.skipped
        if count != self._seen:  # the state is read only when the count moved
            self._seen = count
            for item, _ in loader.state_dict().get("skipped", []):
                self.running.setdefault(int(item), loader.stream_name(int(item)))
        return self.built + [n for n in self.running.values() if n not in self.built]


def _epochs(loader: Any, epochs: int | None) -> Iterator[Iterator[Batch]]:
    e = 0
    while epochs is None or e < epochs:
        yield iter(loader)
        e += 1


def preview(
    source: SourceArgs = None,
    option: SourceOpts = None,
    batches: Annotated[int | None, typer.Option(help="Stop after N batches.", min=1)] = None,
    epochs: Annotated[
        int | None,
        typer.Option(help="Stop after E epochs; 0 keeps going. Default: keep going in a terminal, 1 otherwise.", min=0),
    ] = None,
    snapshot: Annotated[
        Path | None, typer.Option(help="Write the last grid as a labelled PNG contact sheet.", dir_okay=False)
    ] = None,
    refresh: Annotated[float, typer.Option(help="Redraws per second (capped at 15).", min=0.5)] = RENDER_HZ,
    trace: TraceFile = None,
    *,
    opts: LoaderOptions,
) -> None:
    """Watch batches live: every row's current step, loader throughput, waits and worker load.

    With no SOURCE, the built-in camera source runs. Keys: q quits, space pauses, n steps one batch while
    paused. On a non-terminal it prints a plain summary at the end.
    """
    from streamcli.cli.preview import dashboard, frame_from_batch, snapshot_png, text_summary
    from streamcli.shards import iter_limit

    if not refresh >= 0.5:  # the old --fps spelling reaches here without Typer's range check
        raise UsageFailure(f"--refresh {refresh} must be at least 0.5 redraws per second")
    if snapshot is not None and snapshot.suffix.lower() != ".png":
        raise UsageFailure(f"--snapshot {str(snapshot)!r} must end in .png")
    check_config(opts)  # a bad setting is refused before the source is built (a video scan can take a while)
    spec = resolve_source(source, option)
    console = Console()
    pace = Pace(1.0 / min(refresh, 15.0))
    frame: Frame | None = None
    n = 0
    marks: list[float] = []  # when each batch arrived: the steady rate excludes start-up
    show_all = not console.is_terminal  # a pipe prints the last frame: copy every one

    def want_frame(show: bool) -> bool:
        return show_all or show or frame is None or pace.due() or (batches is not None and n + 1 >= batches)

    t0 = time.perf_counter()
    # Native libraries (FFmpeg, OpenCV) write to fd 2, here and in the workers started below: point it at a
    # file for the whole run so nothing can scribble over the screen; warnings show as lines afterwards.
    caught, native = CollectedWarnings(STATE.debug), NativeStderr(STATE.debug)
    w = opts.num_workers
    starting = console.status(
        f"starting {w} worker{'s' * (w != 1)}; waiting for the first batch..."
        if w
        else "starting; waiting for the first batch..."
    )
    if console.is_terminal:
        starting.start()
    try:
        with caught, native, open_loader(spec, opts, **trace_kw(trace)) as loader:
            if epochs is None:
                epochs = 0 if console.is_terminal else 1  # a live view keeps going; a pipe must end
            it = iter_limit(_epochs(loader, epochs or None), batches)
            displays = {f.name: f.display for f in loader.fields} | event_displays(spec.source)
            skips = Skips(spec.source)

            def pull(show: bool = False) -> bool:
                nonlocal frame, n
                batch = next(it, None)
                if batch is None:
                    return False
                if want_frame(show):  # copying out the shown steps is cheap, but only needed when drawing
                    frame = frame_from_batch(batch, loader.stream_name, loader.stream_length, displays)
                n += 1
                marks.append(time.perf_counter())
                del batch  # release the loader's slot before drawing
                return True

            if not console.is_terminal:
                while pull():
                    pass
                console.print(
                    text_summary(
                        frame, loader.stats, title=spec.label(), skipped=spec.skipped, skipped_names=skips.names(loader)
                    )
                )
            else:
                system, notice = colour_notice(console)
                try:
                    first_done = not pull()  # start-up (workers importing, the first decodes) shows a spinner
                finally:
                    starting.stop()
                with (
                    KeyReader() as keys,
                    console.screen(hide_cursor=True),
                    Live(console=console, auto_refresh=False, redirect_stdout=False, redirect_stderr=False) as live,
                ):

                    def render(paused: bool, done: bool) -> None:
                        size = console.size
                        live.update(
                            dashboard(
                                frame,
                                loader.stats,
                                width=size.width,
                                height=size.height,
                                color_system=system,
                                title=spec.label() + ("  (done: q to quit)" if done else ""),
                                paused=paused,
                                notice=notice,
                                skipped=spec.skipped,
                                skipped_names=skips.names(loader),
                                warnings=[*caught.messages, *native.warnings_so_far()],
                            ),
                            refresh=True,
                        )

                    live_loop(
                        keys,
                        pull,
                        render,
                        pace,
                        done=first_done,
                        stop_when_done=batches is not None or not keys.enabled,
                    )
            console.print(
                closing_line(n, loader.stats.steps, loader.stats.bytes, t0, marks), highlight=False, soft_wrap=True
            )
    finally:
        starting.stop()  # idempotent: an error before the first batch must not leave the spinner running
        native.report()
        caught.report()
    if snapshot is not None and frame is not None:
        snapshot_png(frame, snapshot)
        Console(stderr=True).print(f"wrote {snapshot}")


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli preview  |  streamcli preview video samples/clips -b 8 -t 16 -w 2  |  "
        "streamcli preview text samples/text --batches 50 --snapshot grid.png  |  "
        "streamcli preview events samples/events -s representation=voxel --batches 20",
    )(loader_command()(deprecated(SOURCE_OPTION, Alias(("--fps",), "refresh", "--refresh", float))(preview)))
