"""``streamcli plugins``: every installed source plugin, its status and its fields."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamcli.cli._common import StreamcliCommand
from streamcli.plugins import PluginInfo, list_plugins, load_factory


def describe(info: PluginInfo) -> dict[str, Any]:
    """Status and fields of one plugin; a broken plugin is reported, never raised."""
    out: dict[str, Any] = {
        "name": info.name,
        "value": info.value,
        "distribution": info.distribution,
        "version": info.version,
        "status": "ok",
        "error": None,
        "fields": None,
    }
    try:
        factory = load_factory(info.name)
    except Exception as exc:
        out["status"], out["error"] = "broken", str(exc)
        return out
    if not callable(factory):
        out["status"], out["error"] = "broken", f"{info.value} is not callable"
        return out
    try:  # fields need an instance; sources that need an argument report them once given one
        out["fields"] = [{"name": f.name, "shape": list(f.shape), "dtype": f.np_dtype.name} for f in factory().fields()]
    except Exception:
        out["fields"] = None
    return out


def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list (for scripts).")] = False,
) -> None:
    """List the installed source plugins: name, distribution and version, module:attr, status and fields."""
    rows = [describe(p) for p in list_plugins()]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    table = Table(title="streamcli plugins", title_justify="left")
    table.add_column("name", no_wrap=True, style="bold")
    table.add_column("distribution")
    table.add_column("module:attr", overflow="fold")
    table.add_column("status")
    table.add_column("fields of a step")
    for r in rows:
        reason = str(r["error"]).split(" failed to import: ")[-1]
        status = "[green]ok[/]" if r["status"] == "ok" else f"[red]broken[/]: {escape(reason)}"
        if r["fields"] is None:
            fields = "[dim](depends on the argument)[/]" if r["status"] == "ok" else ""
        else:
            fields = ", ".join(f"{f['name']} {f['dtype']}[{','.join(map(str, f['shape']))}]" for f in r["fields"])
        dist = f"{r['distribution'] or '?'} {r['version'] or ''}".strip()
        table.add_row(r["name"], dist, r["value"], status, fields)
    Console(soft_wrap=False).print(table)


def register(app: typer.Typer) -> None:
    app.command(cls=StreamcliCommand, epilog="Example: streamcli plugins --json")(plugins)
