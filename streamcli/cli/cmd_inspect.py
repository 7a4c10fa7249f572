"""``streamcli inspect``: any batch of a run, alone: a Textual app to browse them, or ``--batch K --json``.

Batch K is the one a loader with the same options hands out K-th (counted across epochs, from 0, or from
``--state``'s position), found without reading the batches before it when every length is known
(``streamcli.inspection``); an export folder's batch K is read from its shard.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from streamcli.cli._common import STATE, StreamcliCommand, UsageFailure
from streamcli.cli._loading import check_config, open_loader
from streamcli.cli._noise import CollectedWarnings, NativeStderr
from streamcli.cli._options import LoaderOptions, loader_command
from streamcli.cli._sources import SourceArgs, SourceOpts, resolve_source
from streamcli.cli._trace import TraceFile, trace_kw


def export_dir(args: list[str] | None) -> Path | None:
    """The export folder when the only argument is one (it holds ``index.json``), else None."""
    from streamcli.shards.format import MANIFEST

    if args and len(args) == 1 and (Path(args[0]) / MANIFEST).is_file():
        return Path(args[0])
    return None


def read_state(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageFailure(f"--state {str(path)!r} is not a readable JSON loader state: {exc}") from None
    if not isinstance(state, dict):
        raise UsageFailure(f"--state {str(path)!r} must hold a loader's state_dict() as a JSON object")
    return state


@contextmanager
def opened_batches(
    source: list[str] | None,
    option: list[str] | None,
    opts: LoaderOptions,
    state: Path | None,
    trace: Path | None = None,
) -> Iterator[tuple[Any, str, dict[str, str], Any]]:
    """The batches to inspect, their label, the fields' display hints and the source's tokenizer (or None)."""
    from streamcli.inspection import ExportBatches, LoaderBatches

    out = export_dir(source)
    if out is not None:
        if option or state is not None or trace is not None:
            raise UsageFailure(f"{out} is an export: no loader runs, so -s, --state and --trace do not apply to it")
        exported = ExportBatches(out)
        yield exported, f"export {out}", {f.name: f.display for f in exported.fields}, None
        return
    from streamcli.cli.cmd_preview import event_displays
    from streamcli.errors import StateError

    start = read_state(state)  # a bad file is refused before the source is built (a video scan takes a while)
    check_config(opts)
    spec = resolve_source(source, option)
    with open_loader(spec, opts, **trace_kw(trace)) as loader:
        try:
            batches = LoaderBatches(loader, start=start)
        except StateError as exc:
            raise UsageFailure(f"--state {str(state)!r}: {exc}") from None
        try:
            displays = {f.name: f.display for f in loader.fields} | event_displays(spec.source)
            yield batches, spec.label(), displays, getattr(spec.source, "tokenizer", None)
        finally:
            batches.close()


def rows_table(record: dict[str, Any]) -> Table:
    table = Table(title=f"batch {record['batch']} (epoch {record['epoch']}, its batch {record['index']})")
    workers = any("worker" in r for r in record["rows"])
    for col in ("row", "stream", "item", "positions", "is_first", "valid", *(("worker",) if workers else ())):
        table.add_column(col)
    for r in record["rows"]:
        live = [p for p, v in zip(r["positions"], r["valid"], strict=True) if v]
        table.add_row(
            str(r["row"]),
            str(r["stream"]),
            r["item"] or "(padding)",
            f"{live[0]}..{live[-1]}" if live else "-",
            "".join("1" if f else "." for f in r["is_first"]),
            "".join("1" if v else "." for v in r["valid"]),
            *((str(r.get("worker", "")),) if workers else ()),
        )
    return table


def inspect(
    source: SourceArgs = None,
    option: SourceOpts = None,
    batch: Annotated[int, typer.Option("--batch", "-k", help="The batch to show (0 = the first).", min=0)] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the batch's rows as JSON and exit (no app).")] = False,
    state: Annotated[
        Path | None,
        typer.Option(help="Count the run from this saved loader state (a state_dict() as JSON).", dir_okay=False),
    ] = None,
    trace: TraceFile = None,
    *,
    opts: LoaderOptions,
) -> None:
    """Go to any batch of a run, follow a stream, see what each field holds.

    Batch K is exactly the one a loader with the same options hands out K-th, read without the batches before
    it when every length is known (else going to K replays the run, and says so). SOURCE may be an export
    folder. Keys: ? help, n/→ next, p/← previous, g K Enter go to batch K, ↑/↓ select a row, f follow its
    stream, q quit. With --json, or on a non-terminal, it prints batch K and exits.
    """
    from streamcli.inspection import batch_record

    caught, native = CollectedWarnings(STATE.debug), NativeStderr(STATE.debug)
    with caught, native, opened_batches(source, option, opts, state, trace) as (batches, label, displays, tokenizer):
        if as_json or not sys.stdout.isatty():
            if not batches.seeks and batch:
                Console(stderr=True).print(
                    f"inspect: source lengths unknown, so reaching batch {batch} replays the {batch} batches before "
                    "it (make the source report lengths, e.g. -s scan=true for video, to read it alone)",
                    highlight=False,
                    soft_wrap=True,
                )
            try:
                got = batches.batch(batch)
                record = batch_record(got, batch, batches.stream_name, batches.workers_of(batch, got))
            except IndexError as exc:
                raise UsageFailure(f"--batch {batch}: {exc}") from None
            if as_json:
                typer.echo(json.dumps(record))
            else:
                Console(soft_wrap=True).print(rows_table(record))
            return
        try:
            from streamcli.cli.inspect import InspectApp
        except ImportError:
            raise UsageFailure("streamcli inspect needs Textual: pip install 'streamcli[tui]'") from None
        InspectApp(batches, start=batch, label=label, displays=displays, tokenizer=tokenizer).run()
    native.report()
    caught.report()


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli inspect video samples/clips -s scan=true  |  "
        "streamcli inspect text samples/text --batch 40 --json  |  streamcli inspect out/ --batch 1 --json  |  "
        "streamcli inspect samples/clips -s scan=true --batch 3 --trace trace.json",
    )(loader_command()(inspect))
