"""``streamcli verify``: check an export folder (or URL) and list every problem."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from streamcli.cli._common import StreamcliCommand, UsageFailure, count, echo_report
from streamcli.cli._inputs import url_argument
from streamcli.errors import ShardError
from streamcli.storage import urls


def verify(
    out_dir: Annotated[
        str, typer.Argument(help="The export folder, or its URL (s3://...).", show_default=False, metavar="OUT_DIR")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON on stdout (for scripts), problems included.")
    ] = False,
) -> None:
    """Check an export: the manifest, every shard's checksum, members, shapes and the batch counts.

    Lists every problem found (files the manifest does not name included) and exits with code 1 if there
    is any. Changes nothing: export --resume removes what a kill while the export finished left behind.
    """
    from streamcli.shards import load_manifest
    from streamcli.shards import verify as check

    out_dir = url_argument(out_dir)
    if not urls.is_remote(out_dir) and not Path(out_dir).is_dir():
        what = "does not exist" if not Path(out_dir).exists() else "is a file, not a folder"
        raise UsageFailure(
            f"OUT_DIR {str(out_dir)!r} {what}; pass the folder (or URL) that streamcli export wrote, e.g. "
            "streamcli verify out/"
        )
    console = Console()
    problems = check(out_dir)
    if as_json:
        result: dict[str, Any] = {"out_dir": str(out_dir), "ok": not problems, "problems": problems}
        if not problems:
            m = load_manifest(out_dir)
            result |= {
                "batches": m["batches"],
                "shards": len(m["shards"]),
                "batch_size": m["batch_size"],
                "time_steps": m["time_steps"],
                "layout": m["layout"],
                "fields": [{"name": f.name, "dtype": f.np_dtype.name, "shape": list(f.shape)} for f in m["_fields"]],
            }
        echo_report(result)
        if problems:
            raise ShardError(f"{len(problems)} problem(s) in {out_dir}")
        return
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
    app.command(cls=StreamcliCommand, epilog="Examples: streamcli verify out/  |  streamcli verify out/ --json")(verify)
