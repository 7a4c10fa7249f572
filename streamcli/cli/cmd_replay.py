"""``streamcli replay``: read an export back as training would, check it in full, and summarise it.

The check is ``streamcli.shards.verify`` (the one ``streamcli verify`` runs), without its tidying: replay
changes nothing on disk. The replay itself is ``ShardReader``, the reader a training loop uses.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from streamcli.cli._common import StreamcliCommand, UsageFailure, count, echo_report
from streamcli.cli._inputs import url_argument
from streamcli.errors import ExportBusyError, ShardError
from streamcli.storage import urls


def summarise(out_dir: str | Path) -> dict[str, Any]:
    """Replay every batch of a verified export with ``ShardReader`` and count what it delivers."""
    import torch

    from streamcli.shards import ShardReader

    reader = ShardReader(out_dir)
    m = reader.manifest
    batches, valid, epochs = 0, 0, set()
    seen = torch.zeros(0, dtype=torch.bool)
    per_source = torch.zeros(len(reader.sources), dtype=torch.int64)  # a mix's valid steps per source
    t0 = time.perf_counter()
    for batch in reader:
        batches += 1
        valid += int(batch.valid.sum())
        epochs.add(batch.epoch)
        if batch.source is not None and len(per_source):
            per_source += torch.bincount(batch.source[batch.valid], minlength=len(per_source))[: len(per_source)]
        ids = batch.stream[batch.valid]
        if ids.numel():
            top = int(ids.max()) + 1
            if top > seen.numel():
                seen = torch.cat([seen, torch.zeros(top - seen.numel(), dtype=torch.bool)])
            seen[ids] = True
    read_s = time.perf_counter() - t0
    on_disk = sum(int(s["bytes"]) for s in m["shards"])
    room = batches * reader.batch_size * reader.time_steps
    names = list(m.get("streams") or [])
    return {
        "out_dir": str(out_dir),
        "ok": True,
        "problems": [],
        "source": m.get("source"),
        "batches": batches,
        "shards": len(m["shards"]),
        "batch_size": reader.batch_size,
        "time_steps": reader.time_steps,
        "layout": reader.layout,
        "compression": m.get("compression"),
        "epochs": sorted(epochs),
        "streams": len(names),
        "streams_replayed": int(seen.sum()),
        "sources": [{"name": n, "valid_steps": int(c)} for n, c in zip(reader.sources, per_source, strict=True)],
        "fields": [{"name": f.name, "dtype": f.np_dtype.name, "shape": list(f.shape)} for f in reader.fields],
        "bytes": on_disk,
        "steps": room,
        "valid_steps": valid,
        "useful_share": valid / room if room else None,
        "read_s": read_s,
        "mb_per_s": on_disk / 1e6 / read_s if read_s > 0 else None,
    }


def _value(v: Any) -> str:
    """An option value as the user would type it: ``[64, 64]`` as ``64x64``."""
    return "x".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _text(s: dict[str, Any]) -> list[str]:
    src = s["source"] or {}
    opts = " ".join(f"-s {k}={_value(v)}" for k, v in (src.get("options") or {}).items())
    label = " ".join(str(x) for x in (src.get("plugin"), src.get("arg"), opts) if x)
    share = f" ({s['useful_share']:.0%} real data)" if s["useful_share"] is not None else ""
    rate = f", {s['mb_per_s']:.1f} MB/s" if s["mb_per_s"] is not None else ""
    epochs = s["epochs"]
    span = "-" if not epochs else str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
    return [
        f"[green]ok[/]: {escape(s['out_dir'])} verified and replayed",
        f"  source   {escape(label) or '-'}",
        f"  batches  {s['batches']} in {count(s['shards'], 'shard')}, B={s['batch_size']} T={s['time_steps']} "
        f"{s['layout']}, epochs {span}",
        f"  streams  {s['streams_replayed']} of {s['streams']} replayed; {s['valid_steps']} of {s['steps']} steps"
        f"{share}",
        *(
            ["  sources  " + ", ".join(f"{escape(x['name'])} {x['valid_steps']}" for x in s["sources"]) + " steps"]
            if s["sources"]
            else []
        ),
        "  fields   " + ", ".join(f"{f['name']} {f['dtype']}[{', '.join(map(str, f['shape']))}]" for f in s["fields"]),
        f"  bytes    {s['bytes'] / 1e6:.1f} MB on disk{' (' + s['compression'] + ')' if s['compression'] else ''}; "
        f"read back in {s['read_s']:.3g} s{rate}",
    ]


def replay(
    out_dir: Annotated[
        str, typer.Argument(help="The export folder, or its URL (s3://...).", show_default=False, metavar="OUT_DIR")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON (for scripts).")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No summary: only problems and errors (the exit code tells).")
    ] = False,
) -> None:
    """Check an export in full (as verify does) and replay every batch with ShardReader, as training would.

    Prints what it holds: batches, shards, epochs, streams, the share of real data, fields and bytes, and how
    fast it read back. Changes nothing on disk. Exits with code 1 and lists every problem if the check fails.
    """
    from streamcli.shards import MANIFEST, PARTIAL
    from streamcli.shards import verify as check

    out_dir = url_argument(out_dir)
    if urls.is_remote(out_dir):
        from streamcli.shards.remote_lock import busy as remote_busy
        from streamcli.storage.remote import Remote

        remote = Remote(out_dir)
        holder = remote_busy(remote)
        has_manifest, has_partial = remote.size(MANIFEST) is not None, remote.size(PARTIAL) is not None
    elif not Path(out_dir).is_dir():
        raise UsageFailure(f"OUT_DIR {str(out_dir)!r} is not a folder; name a folder that streamcli export wrote")
    else:
        from streamcli.shards.lock import busy

        holder = busy(out_dir)
        has_manifest, has_partial = (Path(out_dir) / MANIFEST).exists(), (Path(out_dir) / PARTIAL).exists()
    if holder is not None:  # a partial record under a held lock is an export at work, not an interrupted one
        raise ExportBusyError(
            f"OUT_DIR {str(out_dir)!r} is being written by an export that is still running ({holder}); "
            "replay it once that export has finished"
        )
    if not has_manifest:  # a folder, so the command line is right: its content is not an export (as verify says)
        hint = " (an interrupted export: rerun it with --resume)" if has_partial else ""
        raise ShardError(
            f"OUT_DIR {str(out_dir)!r} holds no export (no {MANIFEST}){hint}; name a folder that streamcli export wrote"
        )
    problems = check(out_dir)
    if problems:
        if as_json:
            echo_report({"out_dir": str(out_dir), "ok": False, "problems": problems})
        else:
            err = Console(stderr=True, soft_wrap=True, highlight=False)
            for p in problems:
                err.print(f"[red]problem:[/] {escape(p)}")  # a hint like [zstd] is text
        raise ShardError(f"{len(problems)} problem(s) in {out_dir}; nothing was replayed")
    s = summarise(out_dir)
    if as_json:
        typer.echo(json.dumps(s, indent=1))
        return
    if quiet:
        return
    console = Console(soft_wrap=True, highlight=False)
    for line in _text(s):
        console.print(line)


def register(app: typer.Typer) -> None:
    app.command(
        cls=StreamcliCommand,
        epilog="Examples: streamcli replay out/  |  streamcli replay out/ --json  |  streamcli replay out-mix/ --quiet",
    )(replay)
