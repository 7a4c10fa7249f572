"""``streamcli events-from-video``: simulate an event camera over video (or the camera source), one file per stream.

A command of its own rather than ``export --to evt3``: ``export`` writes the loader's batches (B rows of T steps)
as ``.npz`` shards, whereas this writes whole recordings, one event file per stream, in a camera vendor's format
that the ``events`` source (and the vendors' own tools) read. No loader runs, so no loader option applies.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from streamcli.cli._aliases import SOURCE_OPTION, Alias, deprecated
from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure, count
from streamcli.cli._events_runs import FORMATS, MANIFEST, earlier_run, is_folder, ours_of, remove_run, unlink_ours
from streamcli.cli._inputs import check_input
from streamcli.cli._noise import CollectedWarnings
from streamcli.cli._options import choice_option
from streamcli.cli._sources import SourceOpts, resolve_source
from streamcli.cli._spec import check_option_syntax
from streamcli.errors import StreamcliError
from streamcli.storage import urls

SIMULATOR = "Simulator"
_FLAGS = {"threshold": "--threshold", "refractory_us": "--refractory-us", "noise_hz": "--noise", "seed": "--noise-seed"}


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
        str,
        choice_option(
            "--to", tuple(FORMATS), help="File format: evt3 (Prophesee .raw), aedat4 (iniVation) or npy (numpy)."
        ),
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
    noise_seed: Annotated[int, typer.Option(help="Seed of the noise.", rich_help_panel=SIMULATOR)] = 0,
    fps: Annotated[
        float,
        typer.Option(help="Frame rate of sources without frame times (camera; videos have their own).", min=0.001),
    ] = 30.0,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help=f"Replace the event files an earlier run wrote into OUT_DIR (those its {MANIFEST} names); other "
            "files are kept.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON (for scripts).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary: only errors.")] = False,
) -> None:
    """Simulate an event camera over every stream of a frame source and write one event file per stream.

    Each pixel fires an event when its log intensity moves by --threshold from its reference (ON brighter, OFF
    darker), timed by linear interpolation between frames (the idea of ESIM and v2e). Files are named
    NNNNN-<stream>.raw (or .aedat4, .npy) in stream order; streamcli preview events OUT_DIR, or
    load_source("events", OUT_DIR), reads them back as the same events. Each file is written under a temporary
    name and renamed once complete; events-from-video.json names the files of the run, and --overwrite deletes
    those and nothing else. A run that fails (a full disk) leaves none of its files. This is not an option of
    export: export writes the loader's batches as .npz shards, this writes whole recordings in an event camera's
    own format.
    """
    from streamcli_sources.events.simulate import (
        Simulator,
        frame_size,
        from_source,
        recording_path,
        temporary_names,
        write_recording,
    )

    from streamcli.shards.records import write_json

    seed = noise_seed
    suffix, fmt = FORMATS[to]
    if suffix != ".npy" and importlib.util.find_spec("faery") is None:
        raise UsageFailure(f"--to {to} needs faery: pip install 'streamcli[events]' (or --to npy, which needs nothing)")
    try:
        sim = Simulator(threshold=threshold, refractory_us=refractory_us, noise_hz=noise, seed=seed)
    except ValueError as exc:
        raise UsageFailure(re.sub(r"\b(\w+)=", lambda m: _FLAGS.get(m[1], m[1]) + " ", str(exc))) from None
    if not math.isfinite(fps):
        raise UsageFailure(f"--fps {fps} must be a finite frame rate > 0, e.g. 30")
    *src, out = args
    check_option_syntax(option, "; the folder OUT_DIR is the last argument")
    check_input(src)
    if urls.is_remote(out):  # else Path() takes s3://bucket/x for a local folder named 's3:'
        raise UsageFailure(
            f"OUT_DIR {out!r} is a URL; events-from-video writes to a local folder: name one, "
            "then upload it (e.g. aws s3 cp --recursive DIR URL)"
        )
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageFailure(f"OUT_DIR {out!r} exists and is not a folder; name a folder for the event files")
    blocker = next((p for p in out_dir.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise UsageFailure(f"OUT_DIR {out!r} cannot be created: {str(blocker)!r} is a file, not a folder")
    given = f" (if {out!r} is your input, name OUT_DIR after it)" if len(src) < 2 else ""
    earlier = earlier_run(out_dir)  # names of the previous run's files, None where no run wrote here
    ours = ours_of(earlier or [])
    theirs = sorted(
        p.name for p in (out_dir.iterdir() if out_dir.is_dir() else ()) if p.name not in ours or is_folder(p)
    )
    if earlier is None and theirs:
        raise UsageFailure(
            f"OUT_DIR {out!r} holds {theirs[0]!r}, which events-from-video did not write (there is no {MANIFEST}); "
            f"--overwrite deletes only the files an earlier run wrote, so pick an empty folder or move "
            f"{theirs[0]!r} away{given}"
        )
    if earlier is not None and not overwrite:
        kept = f" ({count(len(theirs), 'other file')} would be kept)" if theirs else ""
        raise UsageFailure(
            f"OUT_DIR {out!r} is not empty; pass --overwrite to replace the event files an earlier run wrote "
            f"there{kept}{given}"
        )
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
    paths = [recording_path(out_dir, i, source, item, suffix) for i, item in enumerate(items)]
    clash = next((p.name for p in paths if p.name in theirs), None)
    if clash is not None:
        raise UsageFailure(
            f"OUT_DIR {out!r} holds {clash!r}, which events-from-video did not write and would replace; "
            f"move it away or pick an empty folder"
        )
    created = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageFailure(f"OUT_DIR {out!r} cannot be created ({exc.strerror}); name a folder you may write") from None
    planned = [p.name for p in paths]
    simulator = {"threshold": threshold, "refractory_us": refractory_us, "noise_hz": noise, "seed": seed}
    record = {"format": to, "sensor_size": list(sensor), "source": spec.record(), "simulator": simulator}
    either = sorted({*(earlier or []), *planned})
    try:
        # Named before anything is written or deleted, so a run killed at any point leaves files the next
        # --overwrite knows to be its own.
        write_json(out_dir / MANIFEST, {**record, "complete": False, "files": either})
    except BaseException:
        if created:
            out_dir.rmdir()
        raise
    err = Console(stderr=True)
    files: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        for name in earlier or []:  # --overwrite: the earlier run's files go first, as export's do
            for n in (name, *temporary_names(name)):
                unlink_ours(out_dir / n)
        with (
            CollectedWarnings(STATE.debug) as caught,
            Progress(
                TextColumn("[bold]events[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("recordings"),
                TextColumn("{task.fields[events]:,} events"),
                TimeRemainingColumn(),
                console=err,
                transient=False,
                disable=as_json or quiet,
            ) as progress,
        ):
            task = progress.add_task("events", total=len(items), events=0)
            for i, (item, path) in enumerate(zip(items, paths, strict=True)):
                ev = from_source(source, item, sim, fps=fps)
                try:
                    write_recording(path, ev, sensor)
                except (OSError, RuntimeError) as exc:  # faery's I/O errors are RuntimeErrors
                    raise StreamcliError(
                        f"cannot write {str(path)!r}: {exc}; the run removed the files it wrote: free space there "
                        "(or pick another OUT_DIR) and run it again"
                    ) from exc
                span = float(ev["t"][-1] - ev["t"][0]) / 1e6 if len(ev) else 0.0
                files.append({"path": str(path), "events": len(ev), "seconds": span})
                progress.update(task, completed=i + 1, events=sum(f["events"] for f in files))
        write_json(out_dir / MANIFEST, {**record, "complete": True, "files": planned})
    except BaseException:
        remove_run(out_dir, either, created)  # a failed run (a full disk, Ctrl-C) leaves none of its files
        raise
    caught.report()
    elapsed = time.perf_counter() - t0
    total = sum(f["events"] for f in files)
    seconds = sum(f["seconds"] for f in files)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "source": spec.record(),
                    "format": to,
                    "out_dir": str(out_dir),
                    "recordings": len(files),
                    "events": total,
                    "seconds": seconds,
                    "elapsed_s": elapsed,
                    "sensor_size": list(sensor),
                    "simulator": simulator,
                    "files": files,
                },
                indent=1,
            )
        )
        return
    if quiet:
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
        epilog="Examples: streamcli events-from-video video samples/clips events-out/ --to evt3  |  "
        "streamcli events-from-video camera -s count=2 -s steps=30 -s size=120x160 events-cam/ --to aedat4 "
        "--noise 0.5 --noise-seed 1  |  streamcli preview events events-cam/ -s representation=voxel --batches 20",
    )(deprecated(SOURCE_OPTION, Alias(("--seed",), "noise_seed", "--noise-seed", int))(events_from_video))
