"""``streamcli verify``: check an export folder (or URL) and list every problem."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from streamcli.cli._common import StreamcliCommand, UsageFailure, count
from streamcli.cli._inputs import url_argument
from streamcli.errors import ShardError
from streamcli.storage import urls


def verify(
    out_dir: Annotated[
        str, typer.Argument(help="The export folder, or its URL (s3://...).", show_default=False, metavar="OUT_DIR")
    ],
) -> None:
    """Check an export: the manifest, every shard's checksum, members, shapes and the batch counts.

    Lists every problem found (files the manifest does not name included) and exits with code 1 if there
    is any. Changes nothing: export --resume removes what a kill while the export finished left behind.
    """
    from streamcli.shards import load_manifest
    from streamcli.shards import verify as check

    out_dir = url_argument(out_dir)
    if not urls.is_remote(out_dir) and not Path(out_dir).is_dir():
        raise UsageFailure(f"{str(out_dir)!r} is not a folder")
    console = Console()
    problems = check(out_dir)
    if problems:
        err = Console(stderr=True, soft_wrap=True, highlight=False)
        for p in problems:
            err.print(f"[red]problem:[/] {escape(p)}")  # a hint like [zstd] is text
        raise ShardError(f"{len(problems)} problem(s) in {out_dir}")
    m = load_manifest(out_dir)
    console.print(
        f"[green]ok[/]: {m['batches']} batches in {count(len(m['shards']), 'shard')}, "
        f"B={m['batch_size']} T={m['time_steps']} {m['layout']}; fields "
        + ", ".join(f.describe() for f in m["_fields"]),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command(cls=StreamcliCommand, epilog="Example: streamcli verify out/")(verify)
