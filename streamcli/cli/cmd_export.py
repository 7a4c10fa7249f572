"""``streamcli export`` (batches to ``.npz`` shards) and ``streamcli verify`` (check an export)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure
from streamcli.cli._noise import CollectedWarnings
from streamcli.cli._options import LoaderOptions, loader_command
from streamcli.cli._sources import SourceOpts, open_loader, resolve_source
from streamcli.errors import ShardError

_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9}


def parse_size(text: str) -> int:
    """``64MB``, ``500k``, ``1g`` or a byte count."""
    t = text.strip().lower().replace("ib", "b")
    num = t.rstrip("kmgb")
    unit = t[len(num) :]
    try:
        value = float(num)
    except ValueError:
        value = -1
    if value <= 0 or unit not in _SIZE_UNITS:
        raise UsageFailure(f"--shard-size {text!r} must be a size like 64MB, 500kB or 1GB")
    return int(value * _SIZE_UNITS[unit])


def export(
    args: Annotated[
        list[str],
        typer.Argument(
            help="[SOURCE] [PATH] OUT_DIR: the source as for preview, then the export folder.",
            show_default=False,
            metavar="[SOURCE] [PATH] OUT_DIR",
        ),
    ],
    option: SourceOpts = None,
    batches: Annotated[int | None, typer.Option(help="Write at most N batches.", min=1)] = None,
    epochs: Annotated[int, typer.Option(help="Write E epochs (the default is one).", min=1)] = 1,
    shard_size: Annotated[str, typer.Option(help="Roll shards over at about this size.")] = "64MB",
    compress: Annotated[bool, typer.Option("--compress", help="Deflate the shards (smaller, slower).")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an export already in OUT_DIR.")] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted export from its last complete shard.")
    ] = False,
    *,
    opts: LoaderOptions,
) -> None:
    """Write batches to OUT_DIR as .npz shards (every field and flag) with an index.json manifest.

    Writes are atomic and reproducible: after a kill, --resume gives files byte-identical to an
    uninterrupted export. Replay with streamcli.ShardReader(OUT_DIR) or the shards source.
    """
    from streamcli.export import export as write_export
    from streamcli.export import iter_limit, make_header

    if overwrite and resume:
        raise UsageFailure("--overwrite and --resume exclude each other; pick one")
    *src, out = args
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageFailure(f"OUT_DIR {out!r} exists and is not a folder")
    blocker = next((p for p in out_dir.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise UsageFailure(f"OUT_DIR {out!r} cannot be created: {str(blocker)!r} is a file, not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (overwrite or resume):
        raise UsageFailure(f"OUT_DIR {out!r} is not empty; pass --overwrite to replace it or --resume to continue")
    shard_bytes = parse_size(shard_size)
    spec = resolve_source(src, option)
    console = Console(stderr=True)
    caught = CollectedWarnings(STATE.debug)  # e.g. a length mismatch: one line each, after the progress bar
    with caught, open_loader(spec, opts) as loader:
        header = make_header(
            fields=loader.fields,
            batch_size=opts.batch_size,
            time_steps=opts.time_steps,
            layout=opts.layout,
            source=spec.record(),
            loader={**opts.record(), "epochs": epochs, "batches": batches},
            shard_bytes=shard_bytes,
            compress=compress,
            streams=[loader.stream_name(i) for i in range(loader.num_streams)],
            stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
        )
        try:
            per_epoch: int | None = len(loader)
        except TypeError:
            per_epoch = None
        total = batches if per_epoch is None else min(batches or 1 << 62, per_epoch * epochs)
        mode = "resume" if resume else "overwrite" if overwrite else "new"
        t0 = time.perf_counter()
        with Progress(
            TextColumn("[bold]export[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("batches"),
            TextColumn("{task.fields[mb]:.0f} MB"), TimeRemainingColumn(), console=console, transient=False,
        ) as progress:  # fmt: skip
            task = progress.add_task("export", total=total, mb=0.0)

            first: list[float] = []  # when the first batch was written: the steady rate excludes start-up

            def report(n: int, nbytes: int) -> None:
                if not first:
                    first.append(time.perf_counter())
                progress.update(task, completed=n, mb=nbytes / 1e6)

            try:
                manifest = write_export(
                    iter_limit((iter(loader) for _ in range(epochs)), batches),
                    out_dir,
                    header,
                    mode=mode,
                    progress=report,
                )
            except KeyboardInterrupt:
                console.print(f"[yellow]interrupted; continue with: streamcli export ... {out} --resume[/]")
                raise
        dt = time.perf_counter() - t0
        steady = time.perf_counter() - first[0] if first else 0.0
    caught.report()
    nbytes = sum(s["bytes"] for s in manifest["shards"])
    n = manifest["batches"]
    rate = f"; after the first batch {nbytes * (n - 1) / n / 1e6 / steady:.1f} MB/s" if n > 1 and steady > 0 else ""
    console.print(
        f"wrote {n} batches in {len(manifest['shards'])} shards to {out}: "
        f"{nbytes / 1e6:.1f} MB in {dt:.1f} s ({nbytes / 1e6 / max(dt, 1e-9):.1f} MB/s{rate})",
        highlight=False,
    )


def verify(
    out_dir: Annotated[Path, typer.Argument(help="The export folder.", show_default=False, metavar="OUT_DIR")],
) -> None:
    """Check an export: the manifest, every shard's checksum, members, shapes and the batch counts.

    Lists every problem found and exits with code 1 if there is any.
    """
    from streamcli.replay import load_manifest
    from streamcli.replay import verify as check

    if not out_dir.is_dir():
        raise UsageFailure(f"{str(out_dir)!r} is not a folder")
    problems = check(out_dir)
    console = Console()
    if problems:
        err = Console(stderr=True, soft_wrap=True, highlight=False)
        for p in problems:
            err.print(f"[red]problem:[/] {p}")
        raise ShardError(f"{len(problems)} problem(s) in {out_dir}")
    m = load_manifest(out_dir)
    console.print(
        f"[green]ok[/]: {m['batches']} batches in {len(m['shards'])} shards, "
        f"B={m['batch_size']} T={m['time_steps']} {m['layout']}; fields "
        + ", ".join(f.describe() for f in m["_fields"]),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli export text books/ out/ -b 16 -t 32 --batches 1000  |  "
        "streamcli export video clips/ out/ --resume",
    )(loader_command()(export))
    app.command(cls=StreamcliCommand, epilog="Example: streamcli verify out/")(verify)
