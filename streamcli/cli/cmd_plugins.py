"""``streamcli plugins``: every installed source plugin, its status and its fields."""

from __future__ import annotations

import inspect
import json
import typing
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamcli.cli._common import StreamcliCommand, UsageFailure
from streamcli.cli._source_options import option_signature
from streamcli.errors import PluginNotFoundError
from streamcli.plugins import PluginInfo, list_plugins, load_factory, option_docs, shown_default


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


def options_of(name: str) -> list[dict[str, Any]]:
    """The ``-s`` options of plugin ``name``: name, type, default and description, read the way ``-s`` parses them.

    The description comes from the source's docstring or ``Annotated`` parameters (``streamcli.plugins.option_docs``);
    a "not given" default that the description replaces ("Default: 50000.") shows the one that applies.
    """
    try:
        factory = load_factory(name)
    except PluginNotFoundError as exc:
        raise UsageFailure(str(exc)) from None  # its message already says "did you mean"
    params, hints, open_kwargs = option_signature(factory)
    docs = option_docs(factory)
    try:
        first = next(iter(inspect.signature(factory).parameters.values()), None)
    except (TypeError, ValueError):
        first = None
    out = []
    for key, p in params.items():
        if first is not None and key == first.name and p.default in (inspect.Parameter.empty, None):
            continue  # the source's argument (PATH), given after the plugin name, not as -o
        ann = hints.get(key, p.annotation)
        default = None if p.default is inspect.Parameter.empty else p.default
        text = docs.get(key, "")
        out.append(
            {
                "name": key,
                "type": type_name(ann, p.default),
                "default": shown_default(default, text),
                "description": text,
            }
        )
    if open_kwargs:
        out.append({"name": "**", "type": "any", "default": None, "description": "any other key=value"})
    return out


def _shown(value: Any) -> str:
    """A default as ``-s`` takes it: ``(64, 64)`` as ``64,64``, a string as written."""
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return str(value) if value != "" else "''"


def type_name(ann: Any, default: Any = inspect.Parameter.empty) -> str:
    """``int``, ``tuple[int, int]``, ``int | None``: an annotation as users read it."""
    if ann is inspect.Parameter.empty:
        return type(default).__name__ if default not in (inspect.Parameter.empty, None) else "any"
    if isinstance(ann, type) and not typing.get_args(ann):
        return ann.__name__
    text = str(ann)
    for prefix in ("typing.", "pathlib.", "collections.abc.", "os."):
        text = text.replace(prefix, "")
    return text


def description(factory: Any) -> str:
    """The first paragraph of the plugin's own docstring, else of its module's, else "no description".

    Never a base class's: ``inspect.getdoc`` would show ``BaseSource``'s for a class that has none.
    """
    own = factory.__dict__.get("__doc__") if inspect.isclass(factory) else getattr(factory, "__doc__", None)
    if not (isinstance(own, str) and own.strip()):
        module = inspect.getmodule(factory)
        own = getattr(module, "__doc__", None)
    if not (isinstance(own, str) and own.strip()):
        return "no description"
    return inspect.cleandoc(own).split("\n\n")[0]


def _one_plugin(name: str, as_json: bool) -> None:
    info = next((p for p in list_plugins() if p.name == name), None)
    opts = options_of(name)
    row = describe(info) if info is not None else {}
    doc = description(load_factory(name))
    if as_json:
        typer.echo(json.dumps({**row, "doc": doc, "options": opts}, indent=1, default=str))
        return
    console = Console(soft_wrap=False, width=max(Console().width, 120))
    console.print(f"[bold]{escape(name)}[/] ({escape(row.get('value') or '')}): {escape(' '.join(doc.split()))}")
    table = Table(title="options (-s key=value)", title_justify="left")
    table.add_column("option", style="bold", no_wrap=True)
    table.add_column("type", no_wrap=True)
    table.add_column("default")
    table.add_column("description", overflow="fold")
    for o in opts:
        default = "-" if o["default"] is None else escape(_shown(o["default"]))
        table.add_row(o["name"], escape(o["type"]), default, escape(o["description"].replace("``", "")) or "-")
    console.print(table)
    if row.get("fields"):
        console.print("fields of a step: " + ", ".join(f"{f['name']} {f['dtype']}{f['shape']}" for f in row["fields"]))


def plugins(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Show this plugin's options (types, defaults, descriptions).", show_default=False, metavar="[NAME]"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")] = False,
) -> None:
    """List the installed source plugins: name, distribution and version, module:attr, status and fields.

    With NAME, list that plugin's -s options with their types, defaults and descriptions.
    """
    if name is not None:
        _one_plugin(name, as_json)
        return
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
    app.command(cls=StreamcliCommand, epilog="Examples: streamcli plugins --json  |  streamcli plugins video")(plugins)
