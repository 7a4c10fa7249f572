"""From the command line to a source: ``[SOURCE] [PATH]`` and ``-s key=value`` to a constructed ``SourceSpec``.

Every problem with what the user gave raises ``UsageFailure`` (exit 2) with a message that names the flag.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from streamcli.cli._common import STATE, UsageFailure, unreadable
from streamcli.cli._inference import infer_plugin
from streamcli.cli._inputs import check_readable, looks_like_path, url_argument
from streamcli.cli._mix import is_mix, resolve_mix
from streamcli.cli._noise import quiet
from streamcli.cli._options import flag_names, source_flag_names
from streamcli.cli._source_options import convert_argument, option_signature, parse_options
from streamcli.cli._spec import SourceSpec, did_you_mean
from streamcli.errors import (
    PluginArgumentError,
    PluginLoadError,
    PluginNotFoundError,
    ShardError,
    SourceError,
    StreamcliError,
)
from streamcli.plugin_refs import is_reference
from streamcli.plugins import list_plugins, load_factory, load_source
from streamcli.source import call_prepare
from streamcli.storage import urls

DEFAULT_SOURCE = "camera"

# ----------------------------------------------------------------------------------------------------------
# Options shared by the commands (the loader's are in _options).

SOURCE_PANEL = "Source"


def complete_source(incomplete: str) -> list[str]:
    """Shell completion of SOURCE: the installed plugin names (read from metadata, no plugin imported)."""
    return [p.name for p in list_plugins() if p.name.startswith(incomplete)]


SourceArgs = Annotated[
    list[str] | None,
    typer.Argument(
        autocompletion=complete_source,
        help="[SOURCE] [PATH]: a plugin name (or module:Class, path/to/file.py:Class) and its argument, or a "
        "path whose plugin is inferred; or "
        "mix NAME=WEIGHT:SOURCE[:PATH] ... to mix sources by weight (-s until=restream, -s NAME.key=value).",
        show_default=False,
        metavar="[SOURCE] [PATH]",
    ),
]
SourceOpts = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        help="Set a source option, key=value (repeatable), e.g. -s size=64x64; streamcli plugins NAME lists them "
        "with their descriptions.",
        rich_help_panel=SOURCE_PANEL,
        show_default=False,
        metavar="KEY=VALUE",
    ),
]


# ----------------------------------------------------------------------------------------------------------
# Sources.


def resolve_source(args: Sequence[str] | None, raw_options: Sequence[str] | None) -> SourceSpec:
    """Turn ``[SOURCE] [PATH]`` and ``-s key=value`` into a constructed source, or raise ``UsageFailure``."""
    args = list(args or [])
    if is_mix(args):  # mix NAME=WEIGHT:SOURCE[:PATH] ...
        return resolve_mix(args[1:], raw_options, resolve_source)
    names = [p.name for p in list_plugins()]
    if len(args) > 2:
        raise UsageFailure(f"expected [SOURCE] [PATH], got {len(args)} arguments: {' '.join(args)}")
    if not args:
        plugin, arg = DEFAULT_SOURCE, None
    elif args[0] in names or is_reference(args[0]):  # an installed plugin, or module:Class / file.py:Class
        plugin, arg = args[0], (args[1] if len(args) > 1 else None)
    elif len(args) == 2:
        msg = f"no plugin named {args[0]!r}; installed plugins: {', '.join(names) or 'none'}"
        raise UsageFailure(did_you_mean(msg, args[0], names))
    else:
        (plugin, why), arg = infer_plugin(args[0], names), args[0]
        if why is not None:  # a folder: say what it was taken for, and what in it does not count
            from rich.console import Console

            Console(stderr=True, highlight=False, soft_wrap=True).print(why, markup=False)
    remote = arg is not None and urls.is_remote(arg)
    if arg is not None:
        arg = url_argument(arg)
    try:
        factory = load_factory(plugin)
    except PluginNotFoundError as exc:
        raise UsageFailure(flag_names(str(exc))) from None
    options = parse_options(factory, raw_options or [], plugin)
    if arg is not None and not remote and looks_like_path(arg) and not Path(arg).exists():
        raise UsageFailure(f"{arg!r} does not exist (the {plugin} source needs an existing file or folder)")
    if arg is not None and not remote and Path(arg).exists():
        check_readable(arg)
    value: Any = arg if arg is None else convert_argument(factory, arg)
    option_names = list(option_signature(factory)[0])

    def bad_input(exc: BaseException) -> UsageFailure:
        msg = source_flag_names(str(exc), option_names)
        return UsageFailure(msg if msg.startswith(f"{plugin}:") else f"{plugin}: {msg}")

    def not_an_export(exc: ShardError) -> UsageFailure:
        """An export folder the shards source cannot read: the user pointed at the wrong folder."""
        from streamcli.shards import MANIFEST, PARTIAL

        folder = Path(str(arg))
        if not remote and folder.is_dir() and not (folder / MANIFEST).exists() and not (folder / PARTIAL).exists():
            return UsageFailure(
                f"{plugin}: {arg!r} holds no export (no {MANIFEST}); point at a folder that streamcli export wrote"
            )
        return UsageFailure(f"{plugin}: {exc}; streamcli verify {arg} lists every problem")

    # Building a source is where it reads the user's input (the video source probes every file), so a
    # ValueError or SourceError here is a problem with what the user gave: exit 2. Its warnings (skipped
    # files) show as one line each, and the native libraries' messages stay hidden unless --debug.
    def attempt(fn: Callable[[], Any], *, hush: bool = True) -> Any:
        with quiet(STATE.debug, native=hush):
            try:
                return fn()
            # Chained (``from exc``), so that --debug shows the plugin's traceback under the one-line message.
            except PluginArgumentError as exc:
                raise UsageFailure(argument_message(plugin, exc)) from exc
            except (PluginNotFoundError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
                raise bad_input(exc) from exc
            except PermissionError as exc:
                raise UsageFailure(unreadable(exc)) from exc
            except (ValueError, SourceError) as exc:  # how the contract says a source refuses its input
                raise bad_input(exc) from exc
            except ShardError as exc:
                raise not_an_export(exc) from exc
            except ImportError as exc:  # an optional extra the input needs (h5py, faery): the user installs it
                raise bad_input(exc) from exc
            except StreamcliError:
                raise
            except Exception as exc:  # a TypeError, KeyError...: arguments were checked, so the plugin's own bug
                raise PluginLoadError(
                    f"the {plugin} source failed to start: {type(exc).__name__}: {exc} (an error in the plugin's "
                    "code, not in your input; rerun with --debug for the traceback)"
                ) from exc

    source = attempt(
        lambda: load_source(plugin, value, **options) if arg is not None else load_source(plugin, **options)
    )
    # Slow one-time work (the video length scan) shows progress on stderr; the library keeps native logs quiet.
    bar = _ScanBar()
    try:
        attempt(lambda: call_prepare(source, bar if bar.enabled else None), hush=False)
    finally:
        bar.close()
    items = attempt(lambda: list(source.items()))
    if not items:
        where = f" in {arg!r}" if arg is not None else ""
        raise UsageFailure(f"no streams found{where} by the {plugin} source")
    # A file the source will read later: refuse it now, not mid-run as a PermissionError; not with an index,
    # which is there so that start-up asks nothing per item.
    for item in [] if getattr(source, "streamcli_index", None) is not None else items:
        if isinstance(item, (str, os.PathLike)) and os.path.isfile(item):
            check_readable(item)
    return SourceSpec(plugin, arg, options, source)


def argument_message(plugin: str, exc: PluginArgumentError) -> str:
    """What the user gives on the command line for what ``exc`` says is missing: the plugin's argument after
    its name, any other required one as ``-s name=VALUE``."""
    if not exc.missing:
        return f"{plugin}: {exc}".replace(f"{plugin}: the {plugin} source", f"{plugin}: the source")
    parts = []
    for name in exc.missing:
        if name == exc.argument:
            parts.append(f"its argument {name!r}: give it after the plugin's name, as in '{plugin} {name.upper()}'")
        else:
            parts.append(f"the option {name!r}: pass -s {name}=VALUE")
    return f"{plugin}: the source needs " + "; and ".join(parts)


class _ScanBar:
    """``progress(done, total)`` drawn as a transient bar on a terminal's stderr; disabled elsewhere."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        console = Console(stderr=True)
        self.enabled = console.is_terminal
        self._bar = Progress(
            TextColumn("scanning lengths"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files"),
            console=console,
            transient=True,
        )
        self._task = self._bar.add_task("scan", total=None)
        self._started = False

    def __call__(self, done: int, total: int) -> None:
        if not self._started:
            self._bar.start()
            self._started = True
        self._bar.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._started:
            self._bar.stop()
