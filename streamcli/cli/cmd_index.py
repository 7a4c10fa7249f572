"""``streamcli index``: write a source's items and their lengths once, so a loader starts without listing storage."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from streamcli.cli._common import StreamcliCommand, UsageFailure, count
from streamcli.cli._inputs import url_argument
from streamcli.cli._options import choice_option, flag_names
from streamcli.cli._source_options import option_signature
from streamcli.cli._sources import SourceOpts, resolve_source
from streamcli.config import MODES
from streamcli.errors import IndexFileError, PluginNotFoundError
from streamcli.storage import urls


def index(
    source: Annotated[str, typer.Argument(help="The source plugin, e.g. text.", show_default=False, metavar="SOURCE")],
    path: Annotated[
        str, typer.Argument(help="The data: a folder or its URL (s3://...).", show_default=False, metavar="PATH")
    ],
    options: SourceOpts = None,
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Write the index here (path or URL); default PATH/.streamcli-index.npz.",
            show_default=False,
            metavar="PATH_OR_URL",
        ),
    ] = None,
    on_error: Annotated[
        str,
        choice_option(
            "--on-error",
            MODES["on_error"],
            "An item whose length cannot be read (a damaged file): raise (no index is written), or leave it out of "
            "the index and name it on stderr.",
        ),
    ] = MODES["on_error"][0],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout (for scripts).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no summary: only errors.")] = False,
) -> None:
    """Write the items of SOURCE at PATH and every item's length to one index file, atomically.

    Loaders and sources then take both from it (no listing, no length per item at start-up), and refuse it
    when the source's settings differ from those it was written with. Rebuild it after changing the data.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from streamcli import index as _index
    from streamcli.plugins import load_factory

    try:
        factory = load_factory(source)
    except PluginNotFoundError as exc:
        raise UsageFailure(flag_names(str(exc))) from None
    raw = list(options or [])
    if "index" in option_signature(factory)[0] and not any(o.split("=", 1)[0].strip() == "index" for o in raw):
        raw.append("index=none")  # list the data itself, whatever index is there now (stale or not)
    spec = resolve_source([source, path], raw)
    assert spec.source is not None
    where = url_argument(out) if out is not None else _index.default_location(url_argument(path))
    if not urls.is_remote(where) and not Path(urls.local_path(where)).parent.is_dir():
        if out is None:
            raise UsageFailure(f"PATH {path!r} is not a folder, so the index has no default place; name one with --out")
        raise UsageFailure(f"--out {out!r}: its folder does not exist; create it or name another path")
    console = Console(stderr=True, quiet=quiet)
    start = time.monotonic()
    with Progress(
        TextColumn("indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("items"),
        console=console,
        transient=True,
        disable=quiet or as_json,
    ) as bar:
        task = bar.add_task("index", total=None)
        skipped: list[dict[str, str]] = []

        def skip(name: str, exc: Exception) -> None:
            skipped.append({"item": name, "error": f"{type(exc).__name__}: {exc}"})
            line = f"skipped {name!r}, left out of the index: {type(exc).__name__}: {exc}"
            if quiet:  # an item left out is said even then (the console, and its progress bar, are off)
                typer.echo(line, err=True)
            else:
                console.print(line, highlight=False, soft_wrap=True)

        try:
            items, lengths, stamps = _index.build_stamped(
                spec.source,
                lambda d, t: bar.update(task, completed=d, total=t),
                skip if on_error == "skip" else None,
                root=url_argument(path),
            )
        except IndexFileError as exc:
            raise UsageFailure(str(exc)) from None
        # A source that leaves out what it cannot open while listing (the video source's probe) names it too.
        named = {s["item"] for s in skipped}
        for name, why in getattr(spec.source, "skipped", None) or []:
            if str(name) not in named:
                skip(str(name), ValueError(why))
    settings, info = _index.settings_of(spec.source), _index.info_of(spec.source)
    extra = _index.arrays_of(spec.source)
    data = _index.encode(
        spec.plugin, settings, items, lengths, info, root=url_argument(path), stamps=stamps, extra=extra
    )
    _index.write(where, data)
    seconds = time.monotonic() - start
    unknown = int((lengths < 0).sum())
    if as_json:
        result: dict[str, Any] = {"index": where, "plugin": spec.plugin, "items": len(items)}
        result |= {"unknown_lengths": unknown, "skipped": skipped, "bytes": len(data), "seconds": round(seconds, 3)}
        typer.echo(json.dumps(result, indent=1))
    elif not quiet:
        console.print(
            f"wrote {where}: {count(len(items), 'item')}, {int(lengths[lengths > 0].sum())} steps"
            + (f", {unknown} of unknown length" if unknown else "")
            + (f", {count(len(skipped), 'damaged item')} left out" if skipped else "")
            + f", {len(data)} bytes in {seconds:.1f} s",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli index text samples/text  |  "
        "streamcli index text s3://bucket/books --out s3://bucket/books.index.npz --json  |  "
        "streamcli index events events-out/ --on-error skip",
    )(index)
