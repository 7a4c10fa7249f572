"""From the command line to a source and a loader: ``[SOURCE] [PATH]``, ``-o key=value`` and the loader options.

Every problem with what the user gave raises ``UsageFailure`` (exit 2) with a message that names the flag.
"""

from __future__ import annotations

import inspect
import os
import stat
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from streamcli.cli._common import STATE, UsageFailure, unreadable
from streamcli.cli._mix import check_mix_input, is_mix, resolve_mix
from streamcli.cli._noise import quiet
from streamcli.cli._options import LoaderOptions, flag_names, source_flag_names
from streamcli.cli._spec import SourceSpec, check_option_syntax, did_you_mean
from streamcli.errors import PluginLoadError, PluginNotFoundError, ShardError, SourceError, StreamcliError
from streamcli.plugins import list_plugins, load_factory, load_source
from streamcli.source import call_prepare, can_open
from streamcli.storage import urls

if TYPE_CHECKING:
    from streamcli.loader import StreamLoader

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
        help="[SOURCE] [PATH]: a plugin name and its argument, or a path whose plugin is inferred; or "
        "mix NAME=WEIGHT:SOURCE[:PATH] ... to mix sources by weight (-o until=restream, -o NAME.key=value).",
        show_default=False,
        metavar="[SOURCE] [PATH]",
    ),
]
SourceOpts = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        help="A source option as key=value (repeatable), e.g. -o size=64x64; streamcli plugins NAME lists them.",
        rich_help_panel=SOURCE_PANEL,
        show_default=False,
        metavar="KEY=VALUE",
    ),
]


# ----------------------------------------------------------------------------------------------------------
# Sources.


def resolve_source(args: Sequence[str] | None, raw_options: Sequence[str] | None) -> SourceSpec:
    """Turn ``[SOURCE] [PATH]`` and ``-o key=value`` into a constructed source, or raise ``UsageFailure``."""
    args = list(args or [])
    if is_mix(args):  # mix NAME=WEIGHT:SOURCE[:PATH] ...
        return resolve_mix(args[1:], raw_options, resolve_source)
    names = [p.name for p in list_plugins()]
    if len(args) > 2:
        raise UsageFailure(f"expected [SOURCE] [PATH], got {len(args)} arguments: {' '.join(args)}")
    if not args:
        plugin, arg = DEFAULT_SOURCE, None
    elif args[0] in names:
        plugin, arg = args[0], (args[1] if len(args) > 1 else None)
    elif len(args) == 2:
        msg = f"no plugin named {args[0]!r}; installed plugins: {', '.join(names) or 'none'}"
        raise UsageFailure(did_you_mean(msg, args[0], names))
    else:
        plugin, arg = infer_plugin(args[0], names), args[0]
    remote = arg is not None and urls.is_remote(arg)
    if arg is not None:
        arg = url_argument(arg)
    try:
        factory = load_factory(plugin)
    except PluginNotFoundError as exc:
        raise UsageFailure(flag_names(str(exc))) from None
    options = parse_options(factory, raw_options or [], plugin)
    if arg is not None and not remote and _looks_like_path(arg) and not Path(arg).exists():
        raise UsageFailure(f"{arg!r} does not exist (the {plugin} source needs an existing file or folder)")
    if arg is not None and not remote and Path(arg).exists():
        check_readable(arg)
    value: Any = arg if arg is None else _convert_argument(factory, arg)
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
            except (PluginNotFoundError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
                raise bad_input(exc) from None
            except PermissionError as exc:
                raise UsageFailure(unreadable(exc)) from None
            except (ValueError, TypeError, SourceError) as exc:
                raise bad_input(exc) from None
            except ShardError as exc:
                raise not_an_export(exc) from None
            except ImportError as exc:  # an optional extra the input needs (h5py, faery): the user installs it
                raise bad_input(exc) from None
            except StreamcliError:
                raise
            except Exception as exc:
                raise PluginLoadError(f"the {plugin} source failed to start: {type(exc).__name__}: {exc}") from exc

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
    for item in items:  # a file the source will read later: refuse it now, not mid-run as a PermissionError
        if isinstance(item, (str, os.PathLike)) and os.path.isfile(item):
            check_readable(item)
    return SourceSpec(plugin, arg, options, source)


def check_readable(path: str | os.PathLike[str]) -> None:
    """Raise ``UsageFailure`` when this user may not read ``path`` (a file is opened, a folder listed).

    ``os.access`` would say yes to root even where the file system says no, so this asks the file system.
    """
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            with os.scandir(path):
                pass
        elif stat.S_ISREG(mode):  # never open anything else: a FIFO would block here
            with open(path, "rb"):
                pass
    except PermissionError as exc:
        raise UsageFailure(unreadable(exc)) from None
    except OSError:
        return  # anything else (a FIFO, a vanished file) is the source's to report


def check_input(args: Sequence[str] | None) -> None:
    """The cheap part of ``resolve_source``, before anything slow: a given PATH exists and can be read."""
    args = list(args or [])
    if is_mix(args):
        return check_mix_input(args[1:], check_input)
    for a in args:
        url_argument(a)  # a URL that cannot be served: exit 2 before anything slow
    args = [a if urls.scheme(a) != "file" else str(urls.local_path(a)) for a in args]
    path = args[1] if len(args) == 2 else args[0] if len(args) == 1 and Path(args[0]).exists() else None
    if path is None or urls.is_remote(path):
        return
    if not Path(path).exists():
        if _looks_like_path(path):  # a plugin may take another argument (camera 4)
            raise UsageFailure(f"{path!r} does not exist (the {args[0]} source needs an existing file or folder)")
        return
    check_readable(path)


def _convert_argument(factory: Any, arg: str) -> Any:
    """The positional argument as its annotated number type (``streamcli preview camera 4``), else as given."""
    try:
        params = list(inspect.signature(factory).parameters.values())
        target = factory.__init__ if inspect.isclass(factory) else factory
        ann = typing.get_type_hints(target).get(params[0].name) if params else None
    except Exception:
        return arg
    if ann in (int, float):
        try:
            return convert(arg, ann)
        except ValueError:
            return arg
    return arg


def url_argument(arg: str) -> str:
    """A path as given, or a ``file://`` URL as its path; any other URL must be servable (else
    ``UnsupportedURLError``, exit 2, naming the URL and the package to install)."""
    if urls.is_remote(arg):
        urls.check(arg)
        return arg
    return str(urls.local_path(arg))


def _looks_like_path(arg: str) -> bool:
    return os.sep in arg or arg.startswith(".") or Path(arg).suffix != ""


def infer_plugin(path: str, names: Sequence[str]) -> str:
    """The first plugin (by name) whose ``can_open(path)`` says yes; broken plugins are skipped."""
    if urls.is_remote(path):
        urls.check(path)
        raise UsageFailure(f"name the source of a URL, e.g. streamcli preview shards {path} (or text, audio)")
    path = str(urls.local_path(path))
    if not Path(path).exists():
        msg = f"{path!r} is neither an installed plugin nor an existing path; plugins: {', '.join(names)}"
        raise UsageFailure(did_you_mean(msg, path, names))
    for name in names:
        try:
            if can_open(load_factory(name), path):
                return name
        except Exception:  # a broken plugin must not stop inference with the others
            continue
    raise UsageFailure(f"no plugin can open {path!r}; name one, e.g. streamcli preview video {path}")


# ----------------------------------------------------------------------------------------------------------
# -o key=value, converted with the factory's signature annotations.


def parse_options(factory: Any, raw: Sequence[str], plugin: str) -> dict[str, Any]:
    params, hints, open_kwargs = option_signature(factory)
    check_option_syntax(raw)
    out: dict[str, Any] = {}
    for item in raw:
        key, _, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if key not in params and not open_kwargs:
            valid = ", ".join(params) or "none"
            raise UsageFailure(f"the {plugin} source has no option {key!r}; valid options: {valid}")
        param = params.get(key)
        ann = hints.get(key, inspect.Parameter.empty)
        default = param.default if param is not None else inspect.Parameter.empty
        try:
            out[key] = convert(value, ann, default)
        except ValueError as exc:
            raise UsageFailure(f"-o {key}={value}: {exc}") from None
    return out


def option_signature(factory: Any) -> tuple[dict[str, inspect.Parameter], dict[str, Any], bool]:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return {}, {}, True
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # unresolvable annotations: fall back to the defaults' types
        hints = {}
    params = list(sig.parameters.values())
    open_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if named and named[0].kind is named[0].POSITIONAL_OR_KEYWORD and named[0].default is inspect.Parameter.empty:
        named = named[1:]  # the source's argument (PATH), not an option
    return {p.name: p for p in named}, hints, open_kwargs


_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n"}


def convert(value: str, ann: Any, default: Any = inspect.Parameter.empty) -> Any:
    """Convert ``value`` to the annotated type: int, float, bool, str, tuples like ``64x64`` or ``64,64``."""
    if ann is inspect.Parameter.empty or ann is Any:
        if default is inspect.Parameter.empty or default is None:
            return value
        ann = type(default)
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        choices = [a for a in typing.get_args(ann) if a is not type(None)]
        if value.lower() == "none" and len(choices) < len(typing.get_args(ann)):
            return None
        errors = []
        for choice in sorted(choices, key=lambda a: a is str):  # try str last
            try:
                return convert(value, choice)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if origin is typing.Literal:
        allowed = [str(a) for a in typing.get_args(ann)]
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
    if ann is bool:
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ValueError("must be true or false")
    if ann is int:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an integer") from None
    if ann is float:
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
    if ann in (str, Path) or (isinstance(ann, type) and issubclass(ann, os.PathLike)):
        return value
    if origin in (tuple, list) or ann in (tuple, list):
        args = typing.get_args(ann)
        sep = "x" if "x" in value and "," not in value else ","
        parts = [p.strip() for p in value.split(sep) if p.strip()]
        elem = args[0] if args else str
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(parts) != len(args):
                raise ValueError(f"needs {len(args)} values, like {'x'.join(['64'] * len(args))}")
            return tuple(convert(p, a) for p, a in zip(parts, args, strict=True))
        conv = [convert(p, elem) for p in parts]
        return tuple(conv) if origin is tuple or ann is tuple else conv
    return value


# ----------------------------------------------------------------------------------------------------------


def check_config(opts: LoaderOptions, **overrides: Any) -> None:
    """Validate the loader settings alone (no source, no torch): a bad value is a usage error naming the flag."""
    from streamcli.config import LoaderConfig

    kwargs = {**opts.kwargs(), **overrides}
    if kwargs.get("transform") is not None:
        from streamcli.transforms import parse_transform

        try:
            parse_transform(kwargs["transform"])
        except ValueError as exc:
            raise UsageFailure(f"--transform: {exc}") from None
    known = {k: v for k, v in kwargs.items() if k in LoaderConfig.__dataclass_fields__}
    try:
        LoaderConfig(opts.batch_size, opts.time_steps, **known)
    except (ValueError, TypeError) as exc:
        raise UsageFailure(flag_names(str(exc))) from None


def open_loader(spec: SourceSpec, opts: LoaderOptions, **overrides: Any) -> StreamLoader:
    """Build the loader; its ``ValueError`` (a bad option value) becomes a usage error."""
    from streamcli.loader import StreamLoader  # imports torch: only when a command runs

    kwargs = opts.kwargs()
    kwargs.update(overrides)
    if spec.source is None:
        raise UsageFailure(f"the {spec.plugin} source was not constructed")
    try:
        return StreamLoader(spec.source, opts.batch_size, opts.time_steps, **kwargs)
    except (ValueError, TypeError) as exc:
        raise UsageFailure(flag_names(str(exc))) from None


class _ScanBar:
    """``progress(done, total)`` drawn as a transient bar on a terminal's stderr; disabled elsewhere."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        console = Console(stderr=True)
        self.enabled = console.is_terminal
        self._bar = Progress(TextColumn("scanning lengths"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
                             console=console, transient=True)  # fmt: skip
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
