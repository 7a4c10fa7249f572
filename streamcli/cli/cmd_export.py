"""``streamcli export``: batches to ``.npz`` shards, locally or on Ray (``streamcli verify`` checks them)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from streamcli.cli._aliases import SOURCE_OPTION, deprecated
from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure, command_with, count
from streamcli.cli._export_plan import (
    batches_to_write,
    check_compress,
    check_out_dir,
    listing,
    parse_size,
    shard_files,
)
from streamcli.cli._export_ray import export_with_ray
from streamcli.cli._inputs import check_input, url_argument
from streamcli.cli._loading import check_config, open_loader
from streamcli.cli._noise import CollectedWarnings
from streamcli.cli._options import LoaderOptions, choice_option, loader_command
from streamcli.cli._sources import SourceOpts, resolve_source
from streamcli.cli._spec import check_option_syntax
from streamcli.cli._trace import TraceFile, trace_kw
from streamcli.errors import ShardError
from streamcli.storage import urls

COMPRESS = ("none", "deflate", "zstd")
"""``--compress`` choices (``streamcli.shards.codec.NAMES``; not imported here: it would import numpy)."""


def export(
    args: Annotated[
        list[str],
        typer.Argument(
            help="[SOURCE] [PATH] OUT_DIR: the source as for preview (or mix NAME=WEIGHT:SOURCE[:PATH] ...), then "
            "the export folder (or a URL, s3://...).",
            show_default=False,
            metavar="[SOURCE] [PATH] OUT_DIR",
        ),
    ],
    option: SourceOpts = None,
    batches: Annotated[
        int | None,
        typer.Option(help="Write N batches, running as many epochs as that takes (cap it with --epochs).", min=1),
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(help="Write at most E epochs. Default: one, or as many as --batches needs.", min=1),
    ] = None,
    shard_size: Annotated[str, typer.Option(help="Roll shards over at about this size.")] = "64MB",
    compress: Annotated[
        str,
        choice_option(
            "--compress",
            COMPRESS,
            help="Compress the shards: zstd needs pip install 'streamcli[zstd]'. Smaller files, slower replay: pays "
            "on remote storage and slow disks.",
        ),
    ] = "none",
    level: Annotated[
        int | None, typer.Option(help="With --compress zstd: the level, 1 (fastest) to 22 (smallest); default 3.")
    ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an export already in OUT_DIR.")] = False,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted export from its last complete shard.")
    ] = False,
    engine: Annotated[
        str,
        choice_option(
            "--engine", ("local", "ray"), help="Where to run: here, or on a Ray cluster (pip install 'streamcli[ray]')."
        ),
    ] = "local",
    address: Annotated[
        str | None, typer.Option(help="With --engine ray: join this Ray cluster (e.g. auto); default: start one.")
    ] = None,
    partitions: Annotated[
        int | None, typer.Option(help="With --engine ray: Ray tasks (default: one per CPU).", min=1)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout (for scripts).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary: only errors.")] = False,
    trace: TraceFile = None,
    *,
    opts: LoaderOptions,
) -> None:
    """Write batches to OUT_DIR as .npz shards (every field and flag) with an index.json manifest.

    Writes are atomic and reproducible: after a kill, --resume continues from the last complete shard (it
    seeks there, nothing before is read again) and the files are byte-identical to an uninterrupted export.
    --batches N writes N batches even when that takes several epochs; --epochs E stops after E epochs.
    --engine ray writes the same files on a Ray cluster. Replay with streamcli.ShardReader(OUT_DIR) or the
    shards source. OUT_DIR may be a URL (s3://bucket/run; pip install 'streamcli[s3]'): the same files, uploaded.
    """
    from streamcli.exports import summarize
    from streamcli.shards import MANIFEST, PARTIAL, make_header
    from streamcli.shards.exporting import export_loader

    if overwrite and resume:
        raise UsageFailure("--overwrite and --resume exclude each other; pick one")
    if engine == "local" and (address is not None or partitions is not None):
        raise UsageFailure("--address and --partitions need --engine ray")
    if engine == "ray" and trace is not None:
        raise UsageFailure("--trace traces a local export's loader; use it with --engine local")
    check_compress(compress, level)
    if engine == "ray":
        from streamcli.shards.on_ray import import_ray

        try:
            import_ray()
        except ImportError as exc:
            raise UsageFailure(f"--engine ray: {exc}") from None
    *src, out = args
    # What the user typed is checked before OUT_DIR: `export video DIR -o OUT` must not blame DIR for being full.
    check_option_syntax(option, "; the export folder OUT_DIR is the last argument")
    check_config(opts)
    check_input(src)
    out = url_argument(out)  # a URL that cannot be served is an error (exit 2), never a local folder "s3:"
    out_dir: str | Path = out if urls.is_remote(out) else Path(out)
    if isinstance(out_dir, Path):
        if out_dir.exists() and not out_dir.is_dir():
            raise UsageFailure(f"OUT_DIR {out!r} exists and is not a folder")
        blocker = next((p for p in out_dir.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise UsageFailure(f"OUT_DIR {out!r} cannot be created: {str(blocker)!r} is a file, not a folder")
    given = "" if len(src) > 1 or not src else f" (if {out!r} is your input, name OUT_DIR after it)"
    try:
        check_out_dir(
            out,
            listing(out_dir),
            overwrite=overwrite,
            resume=resume,
            what="OUT_DIR",
            spell=lambda flag: f"--{flag}",
            hint=given,
        )
    except ShardError as exc:
        raise UsageFailure(str(exc)) from None
    shard_bytes = parse_size(shard_size)
    spec = resolve_source(src, option)
    if engine == "ray" and spec.plugin == "mix":  # Ray tasks rebuild the source from one plugin name
        raise UsageFailure("--engine ray cannot export a mix yet; use --engine local")
    console = Console(stderr=True, quiet=quiet)
    caught = CollectedWarnings(STATE.debug)  # e.g. a length mismatch: one line each, after the progress bar
    with caught, open_loader(spec, opts, **trace_kw(trace)) as loader:
        header = make_header(
            fields=loader.fields,
            batch_size=opts.batch_size,
            time_steps=opts.time_steps,
            layout=opts.layout,
            source=spec.record(),
            loader={**opts.record(), "epochs": epochs, "batches": batches},
            shard_bytes=shard_bytes,
            compress=compress,
            level=level,
            streams=[loader.stream_name(i) for i in range(loader.num_streams)],
            stream_lengths=[loader.stream_length(i) for i in range(loader.num_streams)],
        )
        # --batches alone runs as many epochs as it needs
        n_epochs = epochs if epochs is not None else None if batches is not None else 1
        total = batches_to_write(loader, n_epochs, batches)
        if engine == "ray" and total is None:
            raise UsageFailure(
                f"--engine ray needs every stream's length to cut the export into tasks, but the {spec.plugin} "
                "source does not report them all; make it report lengths (for video: -s scan=true)"
                + ("" if n_epochs is None else ", or give --batches N")
            )
        mode = "resume" if resume else "overwrite" if overwrite else "new"
        was_complete = resume and MANIFEST in listing(out_dir)
        before = shard_files(out_dir) if resume else {}  # what a resumed run keeps, told apart after it
        stale = was_complete and PARTIAL in listing(out_dir)
        t0 = time.perf_counter()
        counts = (
            (TextColumn("{task.fields[rate]}"),) if total is None else (MofNCompleteColumn(), TextColumn("batches"))
        )  # an unknown total shows a rate, never "224/?"
        with Progress(
            TextColumn("[bold]export[/]"),
            BarColumn(),
            *counts,
            TextColumn("{task.fields[mb]:.1f} MB"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            disable=quiet or as_json,
        ) as progress:
            task = progress.add_task("export", total=total, mb=0.0, rate="")
            first: list[float] = []  # when the first batch was written: the steady rate excludes start-up

            def report(n: int, nbytes: int) -> None:
                now = time.perf_counter()
                if not first:
                    first.append(now)
                rate = f"{n} batches, {n / max(now - t0, 1e-9):.1f}/s"
                progress.update(task, completed=n, mb=nbytes / 1e6, rate=rate)

            try:
                if engine == "ray":
                    assert total is not None
                    manifest = export_with_ray(
                        loader,
                        spec,
                        opts,
                        header,
                        out_dir,
                        n_epochs,
                        total,
                        mode,
                        address,
                        partitions,
                        progress,
                        task,
                        console,
                    )
                else:
                    manifest = export_loader(
                        loader, out_dir, header, epochs=n_epochs, batches=batches, mode=mode, progress=report
                    )
            except KeyboardInterrupt:
                again = command_with("--resume", drop=("--overwrite",)) or f"streamcli export ... {out} --resume"
                Console(stderr=True).print(Text(f"interrupted; continue with: {again}", "yellow"), soft_wrap=True)
                raise
        dt = time.perf_counter() - t0
        steady = time.perf_counter() - first[0] if first else 0.0
        stats = loader.stats
    caught.report()
    # The same summary as streamcli.export returns; a Ray export's loader read nothing, so its share is unknown.
    summary = dataclasses.replace(
        summarize(
            manifest,
            out_dir,
            before,
            seconds=dt,
            valid_steps=stats.steps if stats.batches else None,
            batches_read=stats.batches,
            resumed=resume,
            already_complete=was_complete,
            hint=stats.padding_hint() or None,
        ),
        out_dir=str(out),
    )
    n, nbytes, held = summary.batches, summary.bytes, count(summary.shards, "shard")
    if was_complete:
        if as_json:
            typer.echo(json.dumps(summary.to_json(), indent=1))
            return
        note = f"; removed a stale {PARTIAL} left by a kill while it finished" if stale else ""
        console.print(
            f"{out} is already a complete export ({n} batches in {held}); nothing to write{note}", highlight=False
        )
        return
    # A resumed run is timed on what it wrote itself; the shards it kept were written by an earlier run.
    new_n, new_bytes, new_shards = summary.written_batches, summary.written_bytes, summary.written_shards
    rate = (
        f"; after the first batch {new_bytes * (new_n - 1) / new_n / 1e6 / steady:.1f} MB/s"
        if new_n > 1 and steady > 0
        else ""
    )
    hint = summary.hint
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=1))
        return
    share = f"; {summary.useful_share:.0%} of the steps are real data" if summary.useful_share is not None else ""
    done = (
        f"wrote {new_n} batches in {count(new_shards, 'shard')} to {out}: {new_bytes / 1e6:.1f} MB in {dt:.3g} s "
        f"({new_bytes / 1e6 / max(dt, 1e-9):.1f} MB/s{rate}){share}"
    )
    if resume:
        kept_n, kept = n - new_n, count(summary.shards - new_shards, "shard")
        done = (
            f"resumed: kept {kept} ({kept_n} batches, {(nbytes - new_bytes) / 1e6:.1f} MB) of the "
            f"interrupted export; {done}; the export now holds {n} batches in {held}, "
            f"{nbytes / 1e6:.1f} MB"
        )
    console.print(done, highlight=False)
    if hint:
        console.print(f"[yellow]hint:[/] {hint}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli export text samples/text out/ -b 16 -t 32 --batches 100  |  "
        "streamcli export video samples/clips out-clips/ -s scan=true --segment 128 --resume  |  "
        "streamcli export camera out-ray/ --engine ray --partitions 4  |  "
        "streamcli export camera -s steps=64 out-zstd/ --compress zstd --level 3 --json  |  "
        "streamcli export mix prose=0.7:text:samples/text/prose code=0.3:text:samples/text/code out-mix/ "
        "--segment 256 --quiet",
    )(loader_command()(deprecated(SOURCE_OPTION)(export)))
