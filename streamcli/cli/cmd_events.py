"""``streamcli events-from-video``: simulate an event camera over video (or the camera source), one file per stream.

A command of its own rather than ``export --to evt3``: ``export`` writes the loader's batches (B rows of T steps)
as ``.npz`` shards, whereas this writes whole recordings, one event file per stream, in a camera vendor's format
that the ``events`` source (and the vendors' own tools) read. No loader runs, so no loader option applies.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure, count
from streamcli.cli._inputs import check_input
from streamcli.cli._noise import CollectedWarnings
from streamcli.cli._sources import SourceOpts, resolve_source
from streamcli.cli._spec import check_option_syntax

FORMATS = {"evt3": (".raw", "EVT 3.0"), "aedat4": (".aedat4", "AEDAT4"), "npy": (".npy", "numpy")}
"""``--to`` choices: the file suffix the ``events`` source reads, and the format's name."""

SIMULATOR = "Simulator"
_WRITTEN = re.compile(r"^\d{5}-.+(" + "|".join(re.escape(s) for s, _ in FORMATS.values()) + r")(\.partial)?(\.write)?$")
_FLAGS = {"threshold": "--threshold", "refractory_us": "--refractory-us", "noise_hz": "--noise", "seed": "--seed"}


def events_from_video(
    args: Annotated[
        list[str],
        typer.Argument(
            help="[SOURCE] [PATH] OUT_DIR: a frame source as for preview (video clips/, camera), then the folder "
            "for the event files.",
            show_default=False,
            metavar="[SOURCE] [PATH] OUT_DIR",
        ),
    ],
    option: SourceOpts = None,
    to: Annotated[
        str, typer.Option("--to", help="File format: evt3 (Prophesee .raw), aedat4 (iniVation) or npy (numpy).")
    ] = "evt3",
    threshold: Annotated[
        float, typer.Option(help="Contrast threshold, in log intensity.", rich_help_panel=SIMULATOR)
    ] = 0.2,
    refractory_us: Annotated[
        int,
        typer.Option(help="Drop a pixel's events closer than this to its last one (µs).", rich_help_panel=SIMULATOR),
    ] = 0,
    noise: Annotated[
        float, typer.Option(help="Shot-noise events per pixel per second.", rich_help_panel=SIMULATOR)
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the noise.", rich_help_panel=SIMULATOR)] = 0,
    fps: Annotated[
        float,
        typer.Option(help="Frame rate of sources without frame times (camera; videos have their own).", min=0.001),
    ] = 30.0,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Write into a non-empty OUT_DIR, replacing earlier event files.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON (for scripts).")] = False,
) -> None:
    """Simulate an event camera over every stream of a frame source and write one event file per stream.

    Each pixel fires an event when its log intensity moves by --threshold from its reference (ON brighter, OFF
    darker), timed by linear interpolation between frames (the idea of ESIM and v2e). Files are named
    NNNNN-<stream>.raw (or .aedat4, .npy) in stream order; streamcli preview events OUT_DIR, or
    load_source("events", OUT_DIR), reads them back as the same events. Each file is written under a temporary
    name and renamed once complete. This is not an option of export: export writes the loader's batches as .npz
    shards, this writes whole recordings in an event camera's own format.
    """
    from streamcli_sources.events.simulate import Simulator, frame_size, from_source, recording_path, write_recording

    if to not in FORMATS:
        raise UsageFailure(f"--to {to!r} must be one of {', '.join(FORMATS)}")
    suffix, fmt = FORMATS[to]
    if suffix != ".npy" and importlib.util.find_spec("faery") is None:
        raise UsageFailure(f"--to {to} needs faery: pip install 'streamcli[events]' (or --to npy, which needs nothing)")
    try:
        sim = Simulator(threshold=threshold, refractory_us=refractory_us, noise_hz=noise, seed=seed)
    except ValueError as exc:
        raise UsageFailure(re.sub(r"\b(\w+)=", lambda m: _FLAGS.get(m[1], m[1]) + " ", str(exc))) from None
    *src, out = args
    check_option_syntax(option, "; the folder OUT_DIR is the last argument")
    check_input(src)
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageFailure(f"OUT_DIR {out!r} exists and is not a folder; name a folder for the event files")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        given = f" (if {out!r} is your input, name OUT_DIR after it)" if len(src) < 2 else ""
        raise UsageFailure(f"OUT_DIR {out!r} is not empty; pass --overwrite to replace its event files{given}")
    spec = resolve_source(src, option)
    assert spec.source is not None
    source = spec.source
    try:
        sensor = frame_size(source)
    except ValueError:
        names = ", ".join(f.name for f in source.fields())
        raise UsageFailure(
            f"the {spec.plugin} source has no 'frame' field (its fields: {names}); simulate over video or camera"
        ) from None
    items = list(source.items())
    out_dir.mkdir(parents=True, exist_ok=True)
    stale = {p for p in out_dir.iterdir() if p.is_file() and _WRITTEN.match(p.name)}  # an earlier run's files
    err = Console(stderr=True)
    files: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with (
        CollectedWarnings(STATE.debug) as caught,
        Progress(
            TextColumn("[bold]events[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("recordings"),
            TextColumn("{task.fields[events]:,} events"), TimeRemainingColumn(), console=err, transient=False,
            disable=as_json,
        ) as progress,
    ):  # fmt: skip
        task = progress.add_task("events", total=len(items), events=0)
        for i, item in enumerate(items):
            path = recording_path(out_dir, i, source, item, suffix)
            ev = from_source(source, item, sim, fps=fps)
            write_recording(path, ev, sensor)
            stale.discard(path)
            span = float(ev["t"][-1] - ev["t"][0]) / 1e6 if len(ev) else 0.0
            files.append({"path": str(path), "events": len(ev), "seconds": span})
            progress.update(task, completed=i + 1, events=sum(f["events"] for f in files))
    caught.report()
    for p in sorted(stale):  # --overwrite: the folder holds this run's recordings and no others
        p.unlink(missing_ok=True)
    elapsed = time.perf_counter() - t0
    total = sum(f["events"] for f in files)
    seconds = sum(f["seconds"] for f in files)
    if as_json:
        typer.echo(json.dumps({
            "source": spec.record(), "format": to, "out_dir": str(out_dir), "recordings": len(files),
            "events": total, "seconds": seconds, "elapsed_s": elapsed, "sensor_size": list(sensor),
            "simulator": {"threshold": threshold, "refractory_us": refractory_us, "noise_hz": noise, "seed": seed},
            "files": files,
        }, indent=1))  # fmt: skip
        return
    err.print(
        f"wrote {count(len(files), 'recording')} ({total:,} events over {seconds:.3g} s, {sensor[0]}x{sensor[1]}) "
        f"to {out} as {fmt} ({suffix}) in {elapsed:.3g} s",
        highlight=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "events-from-video",
        cls=StreamcliCommand,
        epilog="Examples: streamcli events-from-video video clips/ events/ --to evt3  |  "
        "streamcli events-from-video camera events/ -o size=120x160 --to aedat4 --noise 0.5  |  "
        "streamcli preview events events/ -o representation=voxel",
    )(events_from_video)
